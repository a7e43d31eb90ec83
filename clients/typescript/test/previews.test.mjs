// Previews of a session's web app through Session.sharePort and
// revokePort, against a real pyexec server started with --preview.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { APIError, NotFoundError, PyExec } from "../dist/index.js";
import { withoutUserinfo } from "../dist/previews.js";
import { startServer } from "./server.mjs";

let srv;
let px;

before(async () => {
  srv = await startServer(["--preview"]);
  px = new PyExec(srv.url, { apiKey: srv.apiKey, timeoutMs: 120_000 });
});

after(async () => {
  await srv?.stop();
});

// A cell that serves a page with a marker from a child process on
// 127.0.0.1:port and waits until it listens.
const app = (port) => `
import socket, subprocess, sys, time
open('index.html', 'w').write('<h1>served from the session</h1>')
subprocess.Popen([sys.executable, '-m', 'http.server', '${port}', '--bind', '127.0.0.1'],
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(100):
    try:
        socket.create_connection(('127.0.0.1', ${port}), timeout=1).close()
        break
    except OSError:
        time.sleep(0.1)
print('listening')
`;

test("sharePort opens the app without a key until revokePort", async (t) => {
  const port = 20000 + Math.floor(Math.random() * 20000);
  const s = await px.createSession({ memory_mb: 64 });
  try {
    assert.match((await s.execute(app(port))).stdout, /listening/);
    const share = await s.sharePort(port);
    assert.ok(share.url.startsWith(srv.url + "/preview/") && share.url.endsWith("/"), share.url);
    assert.equal(share.session_id, s.id);
    assert.equal(share.port, port);
    assert.equal(share.isolation, "sandbox");
    assert.ok(Date.parse(share.expires_at) > Date.now(), share.expires_at);
    const page = await fetch(share.url);
    const text = await page.text();
    if (page.status === 409 && text.includes("namespace")) {
      t.skip(`this server cannot reach a session's ports: ${text}`);
      return;
    }
    assert.equal(page.status, 200, text);
    assert.match(text, /served from the session/);
    assert.equal(await s.revokePort(port), 1);
    const gone = await fetch(share.url);
    assert.equal(gone.status, 403);
    assert.match(await gone.text(), /revoked/);
    await assert.rejects(s.sharePort(0), RangeError);
  } finally {
    await s.close();
  }
});

test("another session's port, or an unknown one, is not found", async () => {
  await assert.rejects(px.session("ses_00000000-0000-7000-8000-000000000000").sharePort(8000), NotFoundError);
  await assert.rejects(px.session("ses_00000000-0000-7000-8000-000000000000").revokePort(8000), NotFoundError);
});

test("a server without --preview answers 501", async () => {
  const off = await startServer();
  try {
    const other = new PyExec(off.url, { apiKey: off.apiKey });
    const s = await other.createSession({ memory_mb: 64 });
    try {
      await assert.rejects(s.sharePort(8000), (e) => e instanceof APIError && e.status === 501 && /--preview/.test(e.message));
    } finally {
      await s.close();
    }
  } finally {
    await off.stop();
  }
});

test("withoutUserinfo drops credentials of the base URL", () => {
  assert.equal(withoutUserinfo("https://u:p@example.com:8443/base/"), "https://example.com:8443/base");
  assert.equal(withoutUserinfo("http://127.0.0.1:8080"), "http://127.0.0.1:8080");
});
