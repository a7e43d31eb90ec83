// npm's prepare step: builds dist/ with tsc. npm runs it after `npm ci` or
// `npm install` here, before `npm pack`, and when the package is installed
// from a folder or a git checkout (`npm install ./clients/typescript`),
// where dist/ is not committed and the package's own dev dependencies are
// not installed: then the TypeScript version pinned in devDependencies is
// fetched once into npm's cache with npx.
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..");

const local = join(pkg, "node_modules", "typescript", "bin", "tsc");
const tsconfig = join(pkg, "tsconfig.json");
if (existsSync(local)) {
  execFileSync(process.execPath, [local, "-p", tsconfig], { stdio: "inherit" });
} else {
  const version = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8")).devDependencies.typescript;
  const npx = process.platform === "win32" ? "npx.cmd" : "npx";
  execFileSync(npx, ["--yes", "--package", `typescript@${version}`, "--", "tsc", "-p", tsconfig], { stdio: "inherit" });
}
