// A live pyexec server for the tests: the binary of this repository
// (PYEXEC_BINARY, or built here), started by the test server launcher on a
// free loopback port with an API key and a temporary data directory,
// stopped and removed afterwards.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");

/**
 * The test server launcher (internal/testserver/cmd/testserver):
 * PYEXEC_TESTSERVER (test.sh builds it), else built into dir.
 */
function launcher(dir) {
  if (process.env.PYEXEC_TESTSERVER) return process.env.PYEXEC_TESTSERVER;
  const bin = join(dir, "testserver");
  execFileSync("go", ["build", "-o", bin, "./internal/testserver/cmd/testserver"], { cwd: REPO, stdio: "inherit" });
  return bin;
}

/** The first line a stream gives, or null when it ends first. */
function firstLine(stream) {
  return new Promise((resolve) => {
    let buf = "";
    const onData = (chunk) => {
      buf += chunk;
      const i = buf.indexOf("\n");
      if (i >= 0) done(buf.slice(0, i));
    };
    const done = (line) => {
      stream.off("data", onData);
      stream.off("end", onEnd);
      resolve(line);
    };
    const onEnd = () => done(null);
    stream.setEncoding("utf8");
    stream.on("data", onData);
    stream.on("end", onEnd);
  });
}

/**
 * Starts `pyexec serve` with extra flags through the launcher (which
 * builds pyexec unless PYEXEC_BINARY names one, and removes the data
 * directory and the jails' cgroup parent when its stdin closes); returns
 * {url, apiKey, stop()}. Lint and requirements need ruff and uv:
 * PYEXEC_TEST_TOOLS names their directory (test.sh installs them), else the
 * server has neither and the tests needing them skip.
 */
export async function startServer(extraArgs = []) {
  const tmp = mkdtempSync(join(tmpdir(), "pyexec-node-"));
  const args = ["--max-concurrency", "2", "--queue-size", "8", "--default-timeout", "30s",
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
  const proc = spawn(launcher(tmp), ["-api-key", "node", "--", ...args], { stdio: ["pipe", "pipe", "inherit"] });
  const exited = new Promise((r) => proc.once("exit", r));
  const line = await firstLine(proc.stdout);
  if (line === null) {
    rmSync(tmp, { recursive: true, force: true });
    throw new Error(`the test server did not start (launcher exited with ${await exited})`);
  }
  const info = JSON.parse(line);
  return {
    url: info.url,
    apiKey: info.api_key,
    hasTools,
    noTools: hasTools ? "" : "no ruff and uv (PYEXEC_TEST_TOOLS unset or empty): lint and requirements are unavailable",
    async stop() {
      proc.stdin.end(); // the launcher stops the server and cleans up
      const t = setTimeout(() => proc.kill("SIGKILL"), 60_000);
      await exited;
      clearTimeout(t);
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
