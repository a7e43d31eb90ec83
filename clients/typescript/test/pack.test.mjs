// The package as a user gets it: npm pack, installed from the tarball into
// a clean folder, imported by its name and subpaths from JavaScript (run
// against a real server) and from strict TypeScript (types resolved
// through the exports map); and installed from the package's folder as a
// fresh clone has it (no dist/, no node_modules), which builds dist/.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { startServer } from "./server.mjs";

const PKG = join(dirname(fileURLToPath(import.meta.url)), "..");
const TSC = join(PKG, "node_modules", "typescript", "bin", "tsc");

let srv;
let tmp;

before(async () => {
  srv = await startServer();
  tmp = mkdtempSync(join(tmpdir(), "pyexec-pack-"));
});

after(async () => {
  await srv?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const npm = (args, cwd) => execFileSync("npm", args, { cwd, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

test("npm pack installs and runs in a clean folder", async () => {
  const [info] = JSON.parse(npm(["pack", "--json", "--pack-destination", tmp, "--loglevel=error"], PKG));
  const files = info.files.map((f) => f.path);
  for (const want of ["dist/index.js", "dist/index.d.ts", "dist/tools/ai.js", "dist/tools/openai.d.ts", "dist/tools/anthropic.js", "package.json"]) {
    assert.ok(files.includes(want), `${want} is packed`);
  }
  assert.ok(!files.some((f) => f.startsWith("src/") || f.startsWith("test/") || f.startsWith("node_modules/")), files.join(" "));

  const app = join(tmp, "app");
  execFileSync("mkdir", ["-p", app]);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  npm(["install", "--no-audit", "--no-fund", "--loglevel=error", join(tmp, info.filename)], app);
  // Zero runtime dependencies: the package is all there is.
  assert.deepEqual(readdirSync(join(app, "node_modules")).filter((d) => !d.startsWith(".")), ["pyexec-client"]);

  writeFileSync(
    join(app, "main.mjs"),
    `import { PyExec, NotFoundError } from "pyexec-client";
import { openaiChatTool } from "pyexec-client/openai";
import { anthropicToolResult } from "pyexec-client/anthropic";
import { runPythonTool } from "pyexec-client/ai";
const px = new PyExec(process.env.PYEXEC_URL, { apiKey: process.env.PYEXEC_KEY });
const r = await px.eval("print(2 ** 10)");
const tool = await openaiChatTool(px);
const res = await anthropicToolResult(px, { id: "t", name: "run_python", input: { code: "print('ok')" } });
const ai = await runPythonTool(px);
let notFound = false;
try { await px.getExecution("exe_x"); } catch (e) { notFound = e instanceof NotFoundError; }
console.log(JSON.stringify({ stdout: r.stdout, tool: tool.function.name, anthropic: res.content[0].text.includes("ok"), ai: typeof ai.execute, notFound }));
`,
  );
  const out = execFileSync(process.execPath, ["main.mjs"], {
    cwd: app,
    encoding: "utf8",
    env: { ...process.env, PYEXEC_URL: srv.url, PYEXEC_KEY: srv.apiKey },
  });
  assert.deepEqual(JSON.parse(out), { stdout: "1024\n", tool: "run_python", anthropic: true, ai: "function", notFound: true });

  // A strict TypeScript consumer sees the types through the exports map.
  writeFileSync(
    join(app, "main.ts"),
    `import { PyExec, type ExecutionResult, RateLimitError } from "pyexec-client";
import { openaiFunctionCallOutput, type FunctionCallOutput } from "pyexec-client/openai";
const px = new PyExec("http://localhost:8080");
export async function f(): Promise<[string, number | null, FunctionCallOutput]> {
  const r: ExecutionResult = await px.eval("1", { eval_last_expr: true });
  const out = await openaiFunctionCallOutput(px, { call_id: "c", name: "run_python", arguments: "{}" });
  const e = new RateLimitError(429, "busy", null, "GET /", 1);
  return [r.result ?? "", e.retryAfter, out];
}
`,
  );
  writeFileSync(
    join(app, "tsconfig.json"),
    JSON.stringify({ compilerOptions: { strict: true, module: "NodeNext", moduleResolution: "NodeNext", target: "ES2022", lib: ["ES2022", "DOM"], types: [], noEmit: true }, files: ["main.ts"] }),
  );
  execFileSync(process.execPath, [TSC, "-p", "tsconfig.json"], { cwd: app, encoding: "utf8" });
});

test("npm install of the package's folder, as a fresh clone has it, builds and runs in a clean folder", () => {
  // What git tracks of the package: dist/ is not committed, and the dev
  // dependencies (typescript) are not installed.
  const checkout = join(tmp, "checkout");
  const tracked = execFileSync("git", ["ls-files", "-z", "."], { cwd: PKG, encoding: "utf8" }).split("\0").filter(Boolean);
  for (const f of tracked) cpSync(join(PKG, f), join(checkout, f), { recursive: true });
  assert.ok(!existsSync(join(checkout, "dist")) && !existsSync(join(checkout, "node_modules")));

  const app = join(tmp, "app-from-folder");
  mkdirSync(app);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  npm(["install", "--no-audit", "--no-fund", "--loglevel=error", checkout], app);
  writeFileSync(
    join(app, "main.mjs"),
    `import { PyExec } from "pyexec-client";
import { openaiChatTool } from "pyexec-client/openai";
const px = new PyExec(process.env.PYEXEC_URL, { apiKey: process.env.PYEXEC_KEY });
const r = await px.eval("print(2 ** 10)");
console.log(JSON.stringify({ stdout: r.stdout, tool: (await openaiChatTool(px)).function.name }));
`,
  );
  const out = execFileSync(process.execPath, ["main.mjs"], {
    cwd: app,
    encoding: "utf8",
    env: { ...process.env, PYEXEC_URL: srv.url, PYEXEC_KEY: srv.apiKey },
  });
  assert.deepEqual(JSON.parse(out), { stdout: "1024\n", tool: "run_python" });
});
