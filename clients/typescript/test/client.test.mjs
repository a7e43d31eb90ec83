// The client against a real pyexec server: every method, follow across a
// broken connection, a plot decoded from bytes, a session's state, and the
// typed errors (a real 429 included: the server allows one follower per
// execution).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  AuthenticationError,
  BadRequestError,
  ExecutionResult,
  NotFoundError,
  PayloadTooLargeError,
  PyExec,
  RateLimitError,
  TimeoutError,
  eventOutput,
  tarFromFiles,
} from "../dist/index.js";
import { startRelay } from "./proxy.mjs";
import { skipInstallError, startServer } from "./server.mjs";

let srv;
let px;

before(async () => {
  srv = await startServer(["--max-followers", "1"]);
  px = new PyExec(srv.url, { apiKey: srv.apiKey, timeoutMs: 240_000 });
});

after(async () => {
  await srv?.stop();
});

/** Every event of a follow, in order. */
async function collect(iter) {
  const out = [];
  for await (const ev of iter) out.push(ev);
  return out;
}

function stdoutOf(events) {
  return events.filter((e) => e.type === "stdout").map((e) => e.data).join("");
}

/** Asserts seqs run 1, 2, 3... without a gap or a repeat. */
function assertContiguous(events) {
  assert.deepEqual(events.map((e) => e.seq), events.map((_, i) => i + 1));
}

describe("executions", () => {
  test("health", async () => {
    assert.equal((await px.health()).status, "ok");
  });

  test("eval: stdout, the last expression, an exception", async () => {
    const r = await px.eval("print('hi')\n6 * 7", { eval_last_expr: true });
    assert.ok(r instanceof ExecutionResult);
    assert.equal(r.status, "completed");
    assert.equal(r.exit_code, 0);
    assert.equal(r.stdout, "hi\n");
    assert.equal(r.result, "42");
    assert.ok(r.ok);
    assert.match(r.execution_id, /^exe_/);

    const bad = await px.eval("x = 1\n1 / 0\n");
    assert.equal(bad.status, "completed");
    assert.notEqual(bad.exit_code, 0);
    assert.equal(bad.error_type, "ZeroDivisionError");
    assert.equal(bad.error_line, 2);
    assert.ok(!bad.ok);
  });

  test("eval: files (text and bytes), stdin, limits", async () => {
    const r = await px.eval({
      code: "import helper, sys\nprint(helper.X, sys.stdin.read(), list(open('blob.bin', 'rb').read()))",
      files: { "helper.py": "X = 'h'", "blob.bin": new Uint8Array([0, 1, 255]) },
      stdin: "in",
      timeout_seconds: 20,
      memory_mb: 128,
    });
    assert.equal(r.stdout, "h in [0, 1, 255]\n", r.stderr);
  });

  test("eval: a timeout keeps partial output", async () => {
    const r = await px.eval("import time\nprint('before', flush=True)\ntime.sleep(30)", { timeout_seconds: 1 });
    assert.equal(r.status, "failed");
    assert.equal(r.reason, "timeout");
    assert.equal(r.timed_out, true);
    assert.equal(r.stdout, "before\n");
  });

  test("run: source, a file map with args and env, a tar", async () => {
    const a = await px.run("print('from run')");
    assert.equal(a.stdout, "from run\n");

    const b = await px.run(
      { "app.py": "import os, sys, util\nprint(util.f(), sys.argv[1:], os.environ['GREETING'])", "util.py": "def f(): return 'u'" },
      { args: ["--x", "1"], env: { GREETING: "hello" } },
    );
    assert.equal(b.stdout, "u ['--x', '1'] hello\n", b.stderr + (b.error ?? ""));

    const tar = tarFromFiles({ "pkg/deep/name.py": "print('tar ok')", "main.py": "import runpy\nrunpy.run_path('pkg/deep/name.py')" });
    const c = await px.run(tar, { entrypoint: "main.py" });
    assert.equal(c.stdout, "tar ok\n", c.stderr);
  });

  test("submit, getExecution, listExecutions, waitForCompletion", async () => {
    const id = await px.submit("print('queued')");
    assert.match(id, /^exe_/);
    const done = await px.waitForCompletion(id, { pollIntervalMs: 100 });
    assert.equal(done.status, "completed");
    assert.equal(done.stdout, "queued\n");
    assert.equal((await px.getExecution(id)).stdout, "queued\n");
    const page = await px.listExecutions({ limit: 50 });
    assert.ok(page.executions.some((e) => e.execution_id === id));
    const completed = await px.listExecutions({ status: "completed", limit: 1 });
    assert.equal(completed.executions.length, 1);
    assert.equal(completed.executions[0].status, "completed");
  });

  test("submit + follow: live output and the final status", async () => {
    const id = await px.submit("import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.2)\n");
    const events = await collect(px.follow(id));
    assertContiguous(events);
    assert.equal(stdoutOf(events), "0\n1\n2\n");
    const last = events.at(-1);
    assert.equal(last.type, "status");
    assert.equal(last.data, "completed");
    // Replay after a seq: only what came later.
    const tail = await collect(px.follow(id, { after: events.length - 1 }));
    assert.deepEqual(tail, [last]);
  });

  test("follow: a broken connection is resumed with Last-Event-ID, nothing lost or repeated", async () => {
    const relay = await startRelay(Number(new URL(srv.url).port));
    try {
      const viaRelay = new PyExec(relay.url, { apiKey: srv.apiKey });
      const id = await px.submit("import time\nfor i in range(8):\n    print(i, flush=True)\n    time.sleep(0.25)\n");
      const events = [];
      let cutAt = 0;
      for await (const ev of viaRelay.follow(id, { reconnectDelayMs: 100 })) {
        events.push(ev);
        if (ev.type === "stdout" && ev.data === "1\n" && cutAt === 0) {
          cutAt = ev.seq;
          relay.cut();
        }
      }
      assert.ok(cutAt > 0, "the stream was cut");
      assert.ok(relay.connections >= 2, `reconnected (${relay.connections} connections)`);
      const resumed = relay.requests.find((r) => /\r\nlast-event-id: (\d+)\r\n/i.test(r));
      assert.ok(resumed, "a request carried Last-Event-ID");
      assert.ok(Number(/\r\nlast-event-id: (\d+)\r\n/i.exec(resumed)[1]) >= cutAt);
      assertContiguous(events);
      assert.equal(stdoutOf(events), "0\n1\n2\n3\n4\n5\n6\n7\n");
      assert.equal(events.at(-1).data, "completed");
    } finally {
      await relay.close();
    }
  });

  test("follow: an AbortSignal ends the stream at once", async () => {
    const id = await px.submit("import time\nprint('up', flush=True)\ntime.sleep(60)\n");
    const ctl = new AbortController();
    const started = Date.now();
    await assert.rejects(
      (async () => {
        for await (const ev of px.follow(id, { signal: ctl.signal })) if (ev.type === "stdout") ctl.abort();
      })(),
      (e) => e.name === "AbortError",
    );
    assert.ok(Date.now() - started < 20_000);
    assert.equal(await px.kill(id), "killed");
  });

  test("kill: a running execution ends killed with its partial output", async () => {
    const id = await px.submit("import time\nprint('started', flush=True)\ntime.sleep(60)\n");
    for await (const ev of px.follow(id)) if (ev.type === "stdout" && ev.data.includes("started")) break;
    assert.equal(await px.kill(id), "killed");
    const r = await px.getExecution(id);
    assert.equal(r.status, "killed");
    assert.equal(r.stdout, "started\n");
    assert.equal(await px.kill(id), "killed"); // already over: its state
  });
});

describe("rich results and files", () => {
  test("a plot decoded from bytes, a DataFrame, results", async (t) => {
    if (!srv.hasTools) return t.skip(srv.noTools);
    const r = await px.eval(
      [
        "import matplotlib.pyplot as plt",
        "import pandas as pd",
        "df = pd.DataFrame({'x': [1, 2, 3], 'y': [1, 4, 9]})",
        "display(df)",
        "fig = plt.figure(figsize=(4, 3), dpi=100)",
        "plt.plot(df.x, df.y)",
        "results = {'rows': len(df)}",
      ].join("\n"),
      { requirements: "matplotlib\npandas\n", timeout_seconds: 120 },
    );
    if (skipInstallError(t, r)) return;
    assert.equal(r.exit_code, 0, r.stderr + (r.error ?? ""));
    assert.deepEqual(r.results, { rows: 3 });
    const [img] = r.images;
    assert.ok(img, `no image among ${JSON.stringify(r.outputs.map((o) => o.mimeTypes))}`);
    assert.equal(img.mimeType, "image/png");
    assert.deepEqual([...img.bytes.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    const ihdr = new DataView(img.bytes.buffer, img.bytes.byteOffset);
    assert.equal(new TextDecoder().decode(img.bytes.subarray(12, 16)), "IHDR");
    assert.deepEqual([ihdr.getUint32(16), ihdr.getUint32(20)], [400, 300]);
    assert.ok(img.dataUrl.startsWith("data:image/png;base64,iVBORw0KGgo"));
    const [df] = r.dataFrames;
    assert.deepEqual(df.columns, ["x", "y"]);
    assert.deepEqual(df.records, [{ x: 1, y: 1 }, { x: 2, y: 4 }, { x: 3, y: 9 }]);
    assert.equal(df.total_rows, 3);
    assert.match(r.outputs[0].html, /<table/);
  });

  test("display events decode to outputs while following", async () => {
    const id = await px.submit("display({'a': 1})\nprint('done')");
    const events = await collect(px.follow(id));
    const shown = events.filter((e) => e.type === "display").map(eventOutput);
    assert.equal(shown.length, 1);
    assert.equal(shown[0].plain, "{'a': 1}");
  });

  test("files: listed, listed again, downloaded byte for byte", async () => {
    const r = await px.eval(
      "import os\nos.makedirs('out', exist_ok=True)\nopen('out/report.csv', 'w').write('a,b\\n1,2\\n')\nopen('raw.bin', 'wb').write(bytes(range(256)))",
    );
    assert.equal(r.exit_code, 0, r.stderr);
    assert.deepEqual(r.files.map((f) => f.path).sort(), ["out/report.csv", "raw.bin"]);
    const listed = await px.listFiles(r.execution_id);
    assert.equal(listed.find((f) => f.path === "out/report.csv").size, 8);
    assert.equal(new TextDecoder().decode(await px.downloadFile(r.execution_id, "out/report.csv")), "a,b\n1,2\n");
    const raw = await px.downloadFile(r.execution_id, "raw.bin");
    assert.deepEqual([...raw], [...Array(256).keys()]);
    await assert.rejects(px.downloadFile(r.execution_id, "nope.txt"), NotFoundError);
  });

  test("lint: ruff's diagnostics without running", async (t) => {
    if (!srv.hasTools) return t.skip(srv.noTools);
    const diags = await px.lint({ code: "import os\nprint(undefined_name)\n", select: ["F"] });
    assert.deepEqual(diags.map((d) => d.code).sort(), ["F401", "F821"]);
    assert.equal(diags.find((d) => d.code === "F821").location.line, 2);
    assert.deepEqual(await px.lint({ code: "print(1)\n", select: ["F"] }), []);
    assert.deepEqual(await px.lint("print(1)\n"), [], "the default profile flags likely bugs, not print");
    assert.ok((await px.lint({ code: "print(1)\n", profile: "strict" })).some((d) => d.code === "T201"), "strict flags print");
  });

  test("tools: every format, strict", async () => {
    const names = (tools, get) => tools.map(get).sort();
    const chat = await px.tools("openai");
    const responses = await px.tools("openai-responses", { strict: true });
    const anthropic = await px.tools("anthropic");
    assert.ok(names(chat, (t) => t.function.name).includes("run_python"));
    assert.deepEqual(names(responses, (t) => t.name), names(chat, (t) => t.function.name));
    assert.deepEqual(names(anthropic, (t) => t.name), names(chat, (t) => t.function.name));
    const rp = responses.find((t) => t.name === "run_python");
    assert.equal(rp.strict, true);
    assert.deepEqual(rp.parameters.required, Object.keys(rp.parameters.properties));
    assert.deepEqual(rp.parameters.properties.timeout_seconds.type, ["integer", "null"]);
    await assert.rejects(px.tools("anthropic", { strict: true }), BadRequestError);
  });
});

describe("sessions", () => {
  test("state across cells, files, interrupt, restart, close", async () => {
    const s = await px.createSession({ idle_timeout_seconds: 120 });
    try {
      assert.match(s.id, /^ses_/);
      assert.equal((await s.execute("x = 41")).execution_count, 1);
      const c = await s.execute("x + 1");
      assert.equal(c.result, "42");
      assert.equal(c.execution_count, 2);
      assert.equal(c.session_id, s.id);

      await s.upload("data/n.txt", "7");
      assert.equal((await s.execute("int(open('data/n.txt').read()) * 6")).result, "42");
      await s.execute("open('made.txt', 'w').write('from the cell')");
      const files = (await s.files()).map((f) => f.path);
      assert.ok(files.includes("data/n.txt") && files.includes("made.txt"), files.join(","));
      assert.equal(new TextDecoder().decode(await s.download("made.txt")), "from the cell");

      const info = await s.info();
      assert.equal(info.state, "idle");
      assert.equal(info.execution_count, 4);
      assert.ok((await px.listSessions()).some((x) => x.session_id === s.id));

      // Interrupt a running cell: KeyboardInterrupt, and the session lives on.
      const running = s.execute("import time\nwhile True: time.sleep(0.05)");
      for (let i = 0; i < 100 && (await s.info()).state !== "busy"; i++) await new Promise((r) => setTimeout(r, 50));
      await s.interrupt();
      const stopped = await running;
      assert.equal(stopped.error_type, "KeyboardInterrupt");
      assert.equal((await s.execute("x")).result, "41");

      // Restart: variables gone, files kept.
      const restarted = await s.restart();
      assert.equal(restarted.restarts, 1);
      assert.equal((await s.execute("x")).error_type, "NameError");
      assert.equal((await s.execute("open('made.txt').read()")).result, "'from the cell'");
    } finally {
      await s.close();
    }
    await assert.rejects(s.info(), NotFoundError);
    await assert.rejects(px.session(s.id).execute("1"), NotFoundError);
  });
});

describe("workspaces", () => {
  // A new workspace, or a skip on a server whose jails cannot mount them (501).
  async function freshWorkspace(t) {
    const name = "ts-" + Math.random().toString(36).slice(2, 10);
    try {
      const ws = await px.createWorkspace(name, { quota_mb: 16 });
      assert.equal(ws.version, 0);
      return name;
    } catch (e) {
      if (e.status === 501) {
        t.skip(`this server cannot mount workspaces: ${e.message}`);
        return null;
      }
      throw e;
    }
  }
  const text = (b) => new TextDecoder().decode(b);

  test("files through the API, runs and sessions that use them, versions", async (t) => {
    const name = await freshWorkspace(t);
    if (name === null) return;
    let c = await px.uploadWorkspace(name, { "in.csv": "a,b\n1,2\n", "bin/x.dat": new Uint8Array([0, 1, 255]) }, { dir: "proj" });
    assert.deepEqual([c.version, c.changed, c.added], [1, true, 4]); // two files and their two folders
    c = await px.writeWorkspaceFile(name, "proj/notes dir/a#b.txt", "escaped path");
    assert.equal(c.version, 2);
    assert.deepEqual((await px.workspaceFiles(name, "proj")).map((f) => f.path),
      ["proj/bin", "proj/bin/x.dat", "proj/in.csv", "proj/notes dir", "proj/notes dir/a#b.txt"]);
    assert.deepEqual([...(await px.readWorkspaceFile(name, "proj/bin/x.dat"))], [0, 1, 255]);
    assert.equal(text(await px.readWorkspaceFile(name, "proj/notes dir/a#b.txt")), "escaped path");

    const r = await px.eval("print(open('/workspace/proj/in.csv').read().split()[1])\nopen('/workspace/out.txt', 'w').write('from the run')",
      { workspace: name });
    assert.equal(r.stdout, "1,2\n");
    assert.equal(r.workspace.version, 3);
    assert.equal(r.workspace.added, 1);
    assert.equal(text(await px.readWorkspaceFile(name, "out.txt")), "from the run");

    const ro = await px.run("open('/workspace/out.txt', 'w').write('no')", { workspace: name, workspace_mode: "ro" });
    assert.notEqual(ro.exit_code, 0);
    assert.match(ro.stderr, /Read-only file system/);

    const s = await px.createSession({ workspace: name });
    const cell = await s.execute("open('/workspace/out.txt').read()");
    assert.equal(cell.result, "'from the run'");
    await s.execute("open('/workspace/from-session.txt', 'w').write('kept')");
    await s.close();
    assert.equal(text(await px.readWorkspaceFile(name, "from-session.txt")), "kept");

    const tar = await px.downloadWorkspace(name, "proj");
    assert.ok(text(tar).includes("in.csv") && text(tar).includes("1,2"));

    c = await px.removeWorkspaceFile(name, "proj");
    assert.ok(c.deleted >= 3);
    await assert.rejects(px.readWorkspaceFile(name, "proj/in.csv"), NotFoundError);
    assert.equal(text(await px.readWorkspaceFile(name, "proj/in.csv", { version: 3 })), "a,b\n1,2\n");
    const versions = await px.workspaceVersions(name);
    assert.deepEqual(versions.slice(0, 2).map((v) => v.source), ["create", "upload"]);
    c = await px.restoreWorkspace(name, 3);
    assert.equal(text(await px.readWorkspaceFile(name, "proj/in.csv")), "a,b\n1,2\n");
    assert.equal((await px.getWorkspace(name)).version, c.version);
    assert.ok((await px.listWorkspaces()).some((w) => w.name === name));

    await px.deleteWorkspace(name);
    await assert.rejects(px.getWorkspace(name), NotFoundError);
    await assert.rejects(px.eval("1", { workspace: name }), NotFoundError);
  });
});

describe("errors", () => {
  test("400, 401, 404, 413 as typed errors", async () => {
    await assert.rejects(px.eval("1", { python_version: "2.7" }), (e) => {
      assert.ok(e instanceof BadRequestError);
      assert.equal(e.status, 400);
      assert.match(e.message, /unsupported python_version "2.7"/);
      return true;
    });
    await assert.rejects(new PyExec(srv.url, { apiKey: "wrong" }).eval("1"), AuthenticationError);
    await assert.rejects(new PyExec(srv.url).listExecutions(), AuthenticationError);
    await assert.rejects(px.getExecution("exe_00000000-0000-0000-0000-000000000000"), (e) => {
      assert.ok(e instanceof NotFoundError);
      assert.equal(e.message, "execution not found");
      return true;
    });
    await assert.rejects(px.eval("#" + "x".repeat(101 * 1024)), PayloadTooLargeError);
  });

  test("secrets reach the server, and ask for network", async () => {
    // The test server has no network: with network off, the engine's check of
    // config.secrets refuses them by name; without `network` they ask for it.
    const calls = [
      (o) => px.eval("1", o),
      (o) => px.run({ "main.py": "1" }, o),
      (o) => px.submit({ "main.py": "1" }, o),
    ];
    for (const call of calls) {
      await assert.rejects(call({ secrets: ["GITHUB_TOKEN"], network: false }), (e) => {
        assert.ok(e instanceof BadRequestError);
        assert.match(e.message, /secrets need network/);
        return true;
      });
      await assert.rejects(call({ secrets: ["GITHUB_TOKEN"] }), /network access is disabled/);
    }
  });

  test("the client's timeout", async () => {
    const quick = new PyExec(srv.url, { apiKey: srv.apiKey, timeoutMs: 300 });
    await assert.rejects(quick.eval("import time\ntime.sleep(3)"), TimeoutError);
  });

  test("429: RateLimitError with retryAfter, then retried after Retry-After", async () => {
    const id = await px.submit("import time\nfor i in range(6):\n    print(i, flush=True)\n    time.sleep(0.5)\n");
    const first = px.follow(id);
    assert.equal((await first.next()).done, false); // the one follower this server allows
    const noRetry = new PyExec(srv.url, { apiKey: srv.apiKey, maxRetries: 0 });
    await assert.rejects(collect(noRetry.follow(id)), (e) => {
      assert.ok(e instanceof RateLimitError, String(e));
      assert.equal(e.status, 429);
      assert.equal(e.retryAfter, 1);
      assert.match(e.message, /too many followers/);
      return true;
    });
    // A client that retries gets through once the first follower leaves.
    const retrying = new PyExec(srv.url, { apiKey: srv.apiKey, maxRetries: 5 });
    setTimeout(() => first.return(), 300);
    const events = await collect(retrying.follow(id));
    assertContiguous(events);
    assert.equal(events.at(-1).data, "completed");
    assert.equal(stdoutOf(events), "0\n1\n2\n3\n4\n5\n");
  });
});
