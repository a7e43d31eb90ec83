// The built package uses only what browsers have too (fetch, streams,
// TextDecoder, FormData, Blob, atob/btoa, AbortController): no Node module,
// no Node global, and no import but its own files (no SDK is loaded at
// run time). The same files serve Node ≥ 18 and browsers.
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const DIST = join(dirname(fileURLToPath(import.meta.url)), "..", "dist");

function jsFiles(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? jsFiles(join(dir, e.name)) : e.name.endsWith(".js") ? [join(dir, e.name)] : [],
  );
}

test("dist uses no Node-only API", () => {
  const files = jsFiles(DIST);
  assert.ok(files.length >= 10, `built files: ${files.length}`);
  const nodeOnly = [/\bprocess\./, /\bBuffer\b/, /\brequire\(/, /from\s+["']node:/, /import\(\s*["']node:/, /\b__dirname\b/, /\bglobal\./];
  for (const f of files) {
    // Comments may mention Node in examples; the code may not.
    const code = readFileSync(f, "utf8").replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
    for (const re of nodeOnly) assert.doesNotMatch(code, re, `${relative(DIST, f)} uses ${re}`);
    for (const m of code.matchAll(/from\s+["']([^"']+)["']/g)) {
      assert.ok(m[1].startsWith("./") || m[1].startsWith("../"), `${relative(DIST, f)} imports ${m[1]}: only its own files`);
    }
  }
});
