// A live pyexec server for the tests: the binary of this repository
// (PYEXEC_BINARY, or built here), started on a free loopback port with an
// API key and a temporary data directory, stopped and removed afterwards.
import { spawn, execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, openSync, readFileSync, readdirSync, rmSync, rmdirSync, statSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

/** A free loopback port. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Removes the (empty) cgroup directories named name under /sys/fs/cgroup. */
function removeCgroups(name) {
  const walk = (dir, depth) => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (!e.isDirectory()) continue;
      const p = join(dir, e.name);
      if (e.name === name) removeTree(p);
      else if (depth < 4) walk(p, depth + 1);
    }
  };
  const removeTree = (p) => {
    for (const e of readdirSync(p, { withFileTypes: true })) if (e.isDirectory()) removeTree(join(p, e.name));
    try {
      rmdirSync(p);
    } catch {
      // a cgroup still in use stays; the next server start sweeps it
    }
  };
  walk("/sys/fs/cgroup", 0);
}

/**
 * Starts `pyexec serve` with extra flags; returns {url, apiKey, stop()}.
 * Lint and requirements need ruff and uv: PYEXEC_TEST_TOOLS names their
 * directory (test.sh installs them), else the server has neither and the
 * tests needing them skip.
 */
export async function startServer(extraArgs = []) {
  const tmp = mkdtempSync(join(tmpdir(), "pyexec-node-"));
  let binary = process.env.PYEXEC_BINARY;
  if (!binary) {
    binary = join(tmp, "pyexec");
    execFileSync("go", ["build", "-o", binary, "./cmd/pyexec"], { cwd: REPO, stdio: "inherit" });
  }
  const apiKey = randomBytes(16).toString("hex");
  const port = await freePort();
  const cgroupParent = `pyexec-node-${process.pid}-${port}`;
  const args = ["serve", "--port", String(port), "--data-dir", join(tmp, "data"), "--cgroup-parent", cgroupParent,
    "--api-keys", `node:${apiKey}`, "--max-concurrency", "2", "--queue-size", "8", "--default-timeout", "30s",
    "--log-level", "warn", "--no-detect-imports", "--base-packages", "-"];
  const tools = process.env.PYEXEC_TEST_TOOLS;
  let hasTools = false;
  if (tools) {
    try {
      statSync(join(tools, "bin", "ruff"));
      statSync(join(tools, "bin", "uv"));
      args.push("--ruff", join(tools, "bin", "ruff"), "--uv", join(tools, "bin", "uv"));
      hasTools = true;
    } catch {
      // no tools: lint and requirements tests skip
    }
  }
  if (process.getuid && process.getuid() !== 0) args.push("--unsafe-no-isolation");
  args.push(...extraArgs);
  const logPath = join(tmp, "server.log");
  const log = openSync(logPath, "w");
  const proc = spawn(binary, args, { stdio: ["ignore", log, log] });
  let exited = null;
  proc.on("exit", (code, signal) => {
    exited = { code, signal };
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (exited) throw new Error(`pyexec serve exited (${JSON.stringify(exited)}):\n${readFileSync(logPath, "utf8")}`);
    try {
      const r = await fetch(url + "/health");
      if (r.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      proc.kill("SIGKILL");
      throw new Error(`pyexec serve did not start:\n${readFileSync(logPath, "utf8")}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    apiKey,
    hasTools,
    noTools: hasTools ? "" : "no ruff and uv (PYEXEC_TEST_TOOLS unset or empty): lint and requirements are unavailable",
    log: () => readFileSync(logPath, "utf8"),
    async stop() {
      if (!exited) {
        const done = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGTERM");
        const t = setTimeout(() => proc.kill("SIGKILL"), 40_000);
        await done;
        clearTimeout(t);
      }
      removeCgroups(cgroupParent);
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}

/** Skips a test whose requirements could not be installed (no package index). */
export function skipInstallError(t, result) {
  if (result.reason === "install_error") {
    t.skip(`installing from the package index failed: ${result.error}`);
    return true;
  }
  return false;
}
