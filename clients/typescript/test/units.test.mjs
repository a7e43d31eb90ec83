// Parts that need no server: the SSE parser on the stream shapes the spec
// allows (the server sends only some of them), the tar writer read back by
// Python's tarfile, and requests whose shape a fake fetch checks.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { test } from "node:test";

import { APIError, PyExec, parseSSE, tarFromFiles } from "../dist/index.js";

/** A body that delivers text in the given chunks. */
function body(...chunks) {
  const enc = new TextEncoder();
  return new ReadableStream({
    start(c) {
      for (const ch of chunks) c.enqueue(typeof ch === "string" ? enc.encode(ch) : ch);
      c.close();
    },
  });
}

async function all(stream) {
  const out = [];
  for await (const m of parseSSE(stream)) out.push(m);
  return out;
}

test("SSE: fields, comments, multi-line data, line ends split across chunks", async () => {
  const msgs = await all(
    body("\uFEFF: heartbeat\n\nid: 1\nevent: stdout\ndata: {\"a\":\n", "data: 1}\r", "\n\r\nid: 2\r\ndata:x\r\r", "data: no blank line at the end"),
  );
  assert.deepEqual(msgs, [
    { id: "1", event: "stdout", data: '{"a":\n1}' },
    { id: "2", event: "", data: "x" },
  ]);
});

test("SSE: a multi-byte character split between chunks", async () => {
  const bytes = new TextEncoder().encode("data: é€\n\n");
  const msgs = await all(body(bytes.subarray(0, 7), bytes.subarray(7)));
  assert.deepEqual(msgs, [{ id: "", event: "", data: "é€" }]);
});

test("SSE: leaving the loop cancels the body", async () => {
  let cancelled = false;
  const stream = new ReadableStream({
    pull(c) {
      c.enqueue(new TextEncoder().encode("data: tick\n\n"));
    },
    cancel() {
      cancelled = true;
    },
  });
  for await (const m of parseSSE(stream)) {
    assert.equal(m.data, "tick");
    break;
  }
  assert.ok(cancelled);
});

test("tar: USTAR that Python reads back, long paths split into prefix and name", () => {
  const deep = Array.from({ length: 12 }, (_, i) => `directory-${i}`).join("/") + "/file.py";
  assert.ok(deep.length > 100);
  const tar = tarFromFiles({ "main.py": "print(1)\n", [deep]: new Uint8Array([1, 2, 3]) });
  const listing = execFileSync(
    "python3",
    ["-c", "import sys, tarfile, io\nt = tarfile.open(fileobj=io.BytesIO(sys.stdin.buffer.read()))\nfor m in t: print(m.name, m.size, m.isreg(), oct(m.mode))"],
    { input: tar, encoding: "utf8" },
  );
  assert.equal(listing, `main.py 9 True 0o644\n${deep} 3 True 0o644\n`);
  assert.throws(() => tarFromFiles({ "../x.py": "" }), /unsafe file path/);
  assert.throws(() => tarFromFiles({ "/etc/x.py": "" }), /unsafe file path/);
});

/** A client whose fetch records each request and answers answer(url). */
function recording(answer) {
  const seen = [];
  const fetch = async (url, init = {}) => {
    seen.push({ url: new URL(String(url)), body: typeof init.body === "string" ? JSON.parse(init.body) : undefined });
    const [status, body] = answer(new URL(String(url)));
    return new Response(JSON.stringify(body), { status, headers: { "Content-Type": "application/json" } });
  };
  return { px: new PyExec("http://pyexec.test", { apiKey: "k", fetch }), seen };
}

test("network as a list: network narrowed to those destinations", async () => {
  const { px, seen } = recording(() => [400, { error: "stop here" }]);
  await assert.rejects(px.eval({ code: "1", network: ["pypi.org:443", "*.github.com"] }), APIError);
  await assert.rejects(px.eval({ code: "1", network: false }), APIError);
  assert.deepEqual(seen.map((r) => r.body.config), [
    { network_disabled: false, network: { allow: ["pypi.org:443", "*.github.com"] } },
    { network_disabled: true },
  ]);
});

test("workspace lists: all and owner are sent for operator keys", async () => {
  const { px, seen } = recording((u) => [200, u.pathname.endsWith("/files") ? { files: [] } : { workspaces: [] }]);
  await px.listWorkspaces({ all: true });
  await px.listWorkspaces();
  await px.workspaceFiles("proj", "data", { owner: "team-b", version: 2 });
  await px.workspaceFiles("proj");
  assert.deepEqual(seen.map((r) => r.url.pathname + r.url.search), [
    "/api/v1/workspaces?all=true",
    "/api/v1/workspaces",
    "/api/v1/workspaces/proj/files?dir=data&version=2&owner=team-b",
    "/api/v1/workspaces/proj/files",
  ]);
});
