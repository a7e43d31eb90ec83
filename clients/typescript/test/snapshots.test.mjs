// Snapshots, restores and forks of sessions against a real pyexec server
// (one of its own, whose idle sessions hibernate after 2 s).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { NotFoundError, PyExec } from "../dist/index.js";
import { startServer } from "./server.mjs";

let srv;
let px;

before(async () => {
  srv = await startServer(["--session-hibernate-after", "2"]);
  px = new PyExec(srv.url, { apiKey: srv.apiKey, timeoutMs: 240_000 });
});

after(async () => {
  await srv?.stop();
});

test("snapshot, fork, restore, resume after hibernation, list and delete", async () => {
  const s = await px.createSession({ memory_mb: 64 });
  let child, restored;
  try {
    await s.execute("import threading\ndata = {'answer': 42}\nlock = threading.Lock()\nopen('notes.txt', 'w').write('kept')");
    const snap = await s.snapshot();
    assert.match(snap.snapshot_id, /^snap_/);
    assert.ok(snap.bytes > 0 && snap.saved.includes("data"), JSON.stringify(snap));
    assert.deepEqual(snap.skipped.map((x) => x.name), ["lock"]);

    child = await s.fork();
    assert.equal(child.created?.forked_from, s.id);
    await child.execute("data['answer'] = 0");
    assert.equal((await s.execute("data['answer']")).result, "42");
    assert.equal((await child.execute("data['answer']")).result, "0");

    restored = await px.createSession({ from_snapshot: snap.snapshot_id });
    assert.equal(restored.created?.from_snapshot, snap.snapshot_id);
    assert.equal((await restored.execute("data, open('notes.txt').read(), 'lock' in globals()")).result, "({'answer': 42}, 'kept', False)");

    let state = "";
    for (let i = 0; i < 300 && state !== "hibernated"; i++) {
      await new Promise((r) => setTimeout(r, 100));
      state = (await restored.info()).state;
    }
    assert.equal(state, "hibernated");
    const resumed = await restored.execute("data['answer']");
    assert.equal(resumed.result, "42");
    assert.equal(resumed.resumed, true);
    assert.equal((await restored.execute("1")).resumed, false);

    const listed = (await px.listSnapshots()).filter((x) => x.snapshot_id === snap.snapshot_id);
    assert.equal(listed.length, 1);
    assert.equal(listed[0].session_id, s.id);
    await px.deleteSnapshot(snap.snapshot_id);
    assert.ok(!(await px.listSnapshots()).some((x) => x.snapshot_id === snap.snapshot_id));
    await assert.rejects(px.deleteSnapshot(snap.snapshot_id), NotFoundError);
    await assert.rejects(px.createSession({ from_snapshot: snap.snapshot_id }), NotFoundError);
  } finally {
    for (const x of [s, child, restored]) await x?.close().catch(() => {});
  }
});
