// The helpers' results type-check against the real SDKs' request types
// (openai, @anthropic-ai/sdk and ai, pinned in devDependencies), and so
// do the TypeScript examples of docs/agents.md: see types/.
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const PKG = join(dirname(fileURLToPath(import.meta.url)), "..");

test("the helpers' shapes and the docs' examples type-check against the SDKs", () => {
  // tsc exits non-zero, with the mismatch on stdout, when a shape drifts.
  try {
    execFileSync(process.execPath, [join(PKG, "node_modules", "typescript", "bin", "tsc"), "-p", join(PKG, "test", "types", "tsconfig.json")], {
      encoding: "utf8",
    });
  } catch (e) {
    throw new Error(`tsc found shapes the SDKs do not accept:\n${e.stdout}${e.stderr}`);
  }
});
