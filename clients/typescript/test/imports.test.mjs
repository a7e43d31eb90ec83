// The client's modules import each other without a circle: the import
// graph of src/ (type-only imports and re-exports count too), read with the
// TypeScript compiler's own pre-processor, has no cycle. Needs no server.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const PKG = join(dirname(fileURLToPath(import.meta.url)), "..");
const ts = createRequire(import.meta.url)(join(PKG, "node_modules", "typescript"));

/** The .ts files under dir, recursively. */
function sources(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

/** For each module under root (by path relative to root), the modules of root it imports. */
function importGraph(root) {
  const graph = new Map();
  for (const file of sources(root)) {
    const deps = new Set();
    for (const ref of ts.preProcessFile(readFileSync(file, "utf8"), true, true).importedFiles) {
      if (!ref.fileName.startsWith(".")) continue;
      deps.add(relative(root, resolve(dirname(file), ref.fileName.replace(/\.js$/, ".ts"))));
    }
    graph.set(relative(root, file), deps);
  }
  return graph;
}

/** One cycle of the graph as [a, b, ..., a], or null. */
function findCycle(graph) {
  const state = new Map(); // 1 on the path, 2 done
  const path = [];
  const visit = (n) => {
    state.set(n, 1);
    path.push(n);
    for (const d of [...(graph.get(n) ?? [])].sort()) {
      if (state.get(d) === 1) return [...path.slice(path.indexOf(d)), d];
      if (!state.has(d)) {
        const found = visit(d);
        if (found) return found;
      }
    }
    path.pop();
    state.set(n, 2);
    return null;
  };
  for (const n of [...graph.keys()].sort()) {
    if (!state.has(n)) {
      const found = visit(n);
      if (found) return found;
    }
  }
  return null;
}

test("the client's modules have no import cycle", () => {
  const graph = importGraph(join(PKG, "src"));
  assert.ok(graph.get("session.ts")?.has("transport.ts"), "session.ts imports transport.ts");
  const cycle = findCycle(graph);
  assert.equal(cycle, null, `import cycle: ${cycle?.join(" -> ")}`);
});

test("a type-only import back is a cycle", () => {
  // The check sees the kind of circle the client once had: the session
  // importing its client for a type and a helper.
  const dir = mkdtempSync(join(tmpdir(), "pyexec-imports-"));
  try {
    writeFileSync(join(dir, "client.ts"), 'import { Session } from "./session.js";\nexport class C {}\n');
    writeFileSync(join(dir, "session.ts"), 'import type { C } from "./client.js";\nexport class Session {}\n');
    assert.deepEqual(findCycle(importGraph(dir)), ["client.ts", "session.ts", "client.ts"]);
    writeFileSync(join(dir, "session.ts"), "export class Session {}\n");
    assert.equal(findCycle(importGraph(dir)), null);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
