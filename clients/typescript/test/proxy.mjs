// A TCP relay in front of the real server, so a test can break live
// connections (as a flaky network or a restarting proxy would) and read
// what the client sent.
import { connect, createServer } from "node:net";

export async function startRelay(targetPort) {
  const sockets = new Set();
  const requests = [];
  let connections = 0;
  const server = createServer((client) => {
    connections++;
    const upstream = connect(targetPort, "127.0.0.1");
    sockets.add(client);
    sockets.add(upstream);
    client.on("data", (d) => requests.push(d.toString("latin1")));
    client.pipe(upstream);
    upstream.pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", drop);
    upstream.on("error", drop);
    client.on("close", drop);
    upstream.on("close", drop);
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    get connections() {
      return connections;
    },
    /** Breaks every open connection. */
    cut() {
      for (const s of sockets) s.destroy();
      sockets.clear();
    },
    close() {
      this.cut();
      return new Promise((r) => server.close(r));
    },
  };
}
