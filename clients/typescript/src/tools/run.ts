/**
 * The run_python tool without any SDK: run a model's call and render the
 * outcome as the MCP server does (a status line, the error, stdout and
 * stderr under headers, results, outputs and files), with the plots as
 * images. The SDK helpers (ai, openai, anthropic) wrap this.
 */

import type { PyExec } from "../client.js";
import { APIError } from "../errors.js";
import type { ExecutionResult } from "../rich.js";
import type { ToolFormat, WorkspaceOutcome } from "../types.js";

/** The name of the tool, as GET /api/v1/tools lists it. */
export const RUN_PYTHON = "run_python";
/** Plots one result carries as images at most. */
export const MAX_IMAGES = 8;
const ENTRYPOINT = "main.py";
const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

/** run_python's arguments, as a model sends them (null means not given, as in OpenAI strict mode). */
export interface RunPythonArgs {
  code: string;
  files?: { path: string; content: string }[] | null;
  python_version?: string | null;
  timeout_seconds?: number | null;
  network?: boolean | null;
  /** Network narrowed to these destinations (each also on the operator's list); implies network. */
  network_allow?: string[] | null;
  secrets?: string[] | null;
  stdin?: string | null;
  requirements?: string[] | null;
  session_id?: string | null;
  /** A workspace of the key mounted at /workspace (not with session_id). */
  workspace?: string | null;
  workspace_read_only?: boolean | null;
}

/** An image for the model: media type, base64 and a data URL. */
export interface ToolImage {
  mimeType: string;
  base64: string;
  dataUrl: string;
}

/** The outcome of one call: the text for the model, whether it is an error, the images, and the result. */
export interface ToolOutcome {
  text: string;
  /** A Python exception, a timeout or kill, bad arguments, or a request the server refused. */
  isError: boolean;
  images: ToolImage[];
  /** The execution's result when code ran. */
  result?: ExecutionResult;
}

/** Arguments a model got wrong; the message tells it how. */
class BadArguments extends Error {}

/**
 * The run_python definition in a model API's format, from the server (so
 * it never drifts from the MCP tool).
 */
export async function runPythonDefinition(
  px: PyExec,
  format: ToolFormat,
  options: { strict?: boolean } = {},
): Promise<Record<string, unknown>> {
  const tools = await px.tools(format, options);
  const def = tools.find((t) => {
    const fn = t["function"] as Record<string, unknown> | undefined;
    return (fn?.["name"] ?? t["name"]) === RUN_PYTHON;
  });
  if (def === undefined) throw new Error(`the server at ${px.baseUrl} offers no ${RUN_PYTHON} tool`);
  return def;
}

/** The arguments as an object, without the null values strict mode sends for "not given". */
function parseArguments(args: unknown): Record<string, unknown> {
  let a = args;
  if (a === undefined || a === null || a === "") return {};
  if (typeof a === "string") {
    try {
      a = JSON.parse(a);
    } catch (e) {
      throw new BadArguments(`arguments are not valid JSON: ${(e as Error).message}`);
    }
  }
  if (a === null || typeof a !== "object" || Array.isArray(a)) throw new BadArguments("arguments must be a JSON object");
  return Object.fromEntries(Object.entries(a as Record<string, unknown>).filter(([, v]) => v !== null && v !== undefined));
}

function filesOf(a: Record<string, unknown>): Record<string, string> {
  const files: Record<string, string> = {};
  const list = a["files"] ?? [];
  if (!Array.isArray(list)) throw new BadArguments("files must be an array of {path, content}");
  list.forEach((f: unknown, i) => {
    const o = f as Record<string, unknown> | null;
    if (o === null || typeof o !== "object" || typeof o["path"] !== "string" || typeof o["content"] !== "string") {
      throw new BadArguments(`files[${i}] must be an object with string path and content`);
    }
    if (o["path"] === ENTRYPOINT || o["path"] in files) {
      throw new BadArguments(`files[${i}]: ${JSON.stringify(o["path"])} is given twice (the code argument is ${ENTRYPOINT})`);
    }
    files[o["path"]] = o["content"];
  });
  return files;
}

function requirementsOf(a: Record<string, unknown>): string | undefined {
  const reqs = a["requirements"] ?? [];
  if (!Array.isArray(reqs) || !reqs.every((r) => typeof r === "string")) throw new BadArguments("requirements must be a list of strings");
  reqs.forEach((r: string, i) => {
    if (r.trim() === "" || /[\r\n]/.test(r) || r.trim().startsWith("-")) {
      throw new BadArguments(`requirements[${i}]: ${JSON.stringify(r)} is not one package, e.g. pandas or requests==2.32.3`);
    }
  });
  return reqs.length > 0 ? reqs.map((r: string) => r.trim() + "\n").join("") : undefined;
}

function checkCommon(a: Record<string, unknown>): void {
  if (typeof a["code"] !== "string") throw new BadArguments("code is required and must be a string");
  const v = a["python_version"];
  if (v !== undefined && (typeof v !== "string" || !/^3\.[0-9]{1,2}$/.test(v))) {
    throw new BadArguments(`python_version ${JSON.stringify(v)} is not MAJOR.MINOR, e.g. 3.12`);
  }
  const t = a["timeout_seconds"];
  if (t !== undefined && (typeof t !== "number" || !Number.isInteger(t) || t < 1)) {
    throw new BadArguments("timeout_seconds must be a positive integer");
  }
}

/** The secrets argument: operator secrets by name, undefined when none. */
function secretsOf(a: Record<string, unknown>): string[] | undefined {
  const s = a["secrets"];
  if (s === undefined) return undefined;
  if (!Array.isArray(s) || !s.every((x) => typeof x === "string")) {
    throw new BadArguments("secrets must be a list of strings");
  }
  return s.length > 0 ? s : undefined;
}

/** The network_allow argument: destinations the network is narrowed to, undefined when none. */
function networkAllowOf(a: Record<string, unknown>): string[] | undefined {
  const n = a["network_allow"];
  if (n === undefined) return undefined;
  if (!Array.isArray(n) || !n.every((x) => typeof x === "string")) {
    throw new BadArguments("network_allow must be a list of strings");
  }
  return n.length > 0 ? n : undefined;
}

/** The text of a finished execution, as the MCP server renders it. */
export function renderResult(r: ExecutionResult): string {
  const out = [`status: ${r.status}, exit code ${r.exit_code}` + (r.duration_ms ? `, ${r.duration_ms} ms` : "")];
  if (r.error_type || r.error) {
    let line = "error: " + (r.error_type ?? "");
    if (r.error_type && r.error) line += ": ";
    line += r.error ?? "";
    if (r.error_line) line += ` (line ${r.error_line})`;
    out.push(line);
  }
  const streams: [string, string, boolean][] = [
    ["stdout", r.stdout, r.stdout_truncated],
    ["stderr", r.stderr, r.stderr_truncated],
  ];
  for (const [name, text, truncated] of streams) {
    if (!text) continue;
    out.push(`--- ${name} ---`, text.endsWith("\n") ? text.slice(0, -1) : text);
    if (truncated) out.push(`[${name} truncated at the server's output limit]`);
  }
  if (!r.stdout && !r.stderr) out.push("(no output)");
  out.push(...workspaceLines(r.workspace));
  if (r.results !== undefined && r.results !== null) out.push("--- results ---", JSON.stringify(r.results));
  let images = 0;
  r.outputs.forEach((o, i) => {
    const img = o.image();
    if (img !== undefined && IMAGE_TYPES.has(img.mimeType)) {
      if (images < MAX_IMAGES) {
        images++;
        out.push(`--- output ${i + 1}: ${img.mimeType}, image ${images} below ---`);
      } else {
        out.push(`--- output ${i + 1}: ${img.mimeType}, left out (at most ${MAX_IMAGES} images per result) ---`);
      }
      return;
    }
    out.push(`--- output ${i + 1} (${[...o.mimeTypes].sort().join(", ")}) ---`);
    const text = o.plain ?? "";
    out.push(text.endsWith("\n") ? text.slice(0, -1) : text);
  });
  if (r.outputs_truncated) out.push("[further outputs left out at the server's size limit]");
  if (r.files.length > 0) {
    out.push(`--- files (read one with read_file, execution_id ${r.execution_id}) ---`);
    for (const f of r.files) out.push(`${f.path} (${f.size} bytes, ${f.mime})`);
  }
  if (r.files_omitted) {
    out.push(`[${r.files_omitted} more file${r.files_omitted === 1 ? "" : "s"} not collected: over the server's limits]`);
  }
  return out.join("\n") + "\n";
}

/** What became of a run's workspace, as the MCP server reports it. */
function workspaceLines(w: WorkspaceOutcome | undefined): string[] {
  if (w === undefined) return [];
  if (w.error) return [`workspace ${w.name}: its changes were not kept: ${w.error}`];
  if (!w.changed) return [`workspace ${w.name}: unchanged, version ${w.version}`];
  return [
    `workspace ${w.name}: version ${w.version} (${w.added} added, ${w.modified} modified, ${w.deleted} deleted)`,
    ...(w.conflicts ?? []).map((c) => `workspace conflict: ${c.path}: ${c.reason} (kept as ${c.kept_as ?? ""})`),
  ];
}

function outcomeOf(r: ExecutionResult, extra = ""): ToolOutcome {
  const images: ToolImage[] = [];
  for (const img of r.images) {
    if (!IMAGE_TYPES.has(img.mimeType) || images.length >= MAX_IMAGES) continue;
    images.push({ mimeType: img.mimeType, base64: img.dataUrl.slice(img.dataUrl.indexOf(",") + 1), dataUrl: img.dataUrl });
  }
  return { text: renderResult(r) + extra, isError: !r.ok, images, result: r };
}

/**
 * Runs one run_python call: `args` is the JSON text or the object the
 * model produced. Mistakes the model can fix (bad arguments, an unknown
 * version, a Python exception, a refused request) come back as an error
 * outcome for the model to read; a server that cannot be reached throws.
 * With session_id, the code runs as the session's next cell.
 */
export async function runPython(px: PyExec, args: unknown, options: { signal?: AbortSignal } = {}): Promise<ToolOutcome> {
  try {
    const a = parseArguments(args);
    checkCommon(a);
    const files = filesOf(a);
    const requirements = requirementsOf(a);
    const secrets = secretsOf(a);
    const allow = networkAllowOf(a);
    const code = a["code"] as string;
    const timeout = a["timeout_seconds"] as number | undefined;
    const sessionId = a["session_id"];
    const workspace = a["workspace"];
    if (workspace !== undefined && (typeof workspace !== "string" || workspace === "")) throw new BadArguments("workspace must be a workspace's name");
    const readOnly = a["workspace_read_only"];
    if (readOnly !== undefined && typeof readOnly !== "boolean") throw new BadArguments("workspace_read_only must be true or false");
    if (readOnly === true && workspace === undefined) throw new BadArguments("workspace_read_only needs a workspace");
    if (sessionId !== undefined) {
      if (typeof sessionId !== "string" || sessionId === "") throw new BadArguments("session_id must be a string");
      if (a["stdin"] !== undefined || a["python_version"] !== undefined || a["network"] || allow !== undefined || secrets !== undefined ||
        requirements !== undefined) {
        throw new BadArguments(
          "stdin, python_version, network, network_allow, secrets and requirements do not apply to a session's cell (set them at create_session)",
        );
      }
      if (workspace !== undefined) {
        throw new BadArguments("workspace does not apply to a session's cell (give it when the session is created)");
      }
      const s = px.session(sessionId);
      for (const [path, content] of Object.entries(files)) await s.upload(path, content, options);
      const cell = await s.execute(code, { ...options, ...(timeout !== undefined ? { timeout_seconds: timeout } : {}) });
      let extra = cell.result !== undefined ? `value: ${cell.result}\n` : "";
      if (cell.session_ended) extra += "the session ended; create a new one to continue\n";
      return outcomeOf(cell, extra);
    }
    if (a["stdin"] !== undefined && typeof a["stdin"] !== "string") throw new BadArguments("stdin must be a string");
    const r = await px.eval({
      files: { [ENTRYPOINT]: code, ...files },
      entrypoint: ENTRYPOINT,
      ...(requirements !== undefined ? { requirements } : {}),
      ...(typeof a["python_version"] === "string" ? { python_version: a["python_version"] } : {}),
      ...(timeout !== undefined ? { timeout_seconds: timeout } : {}),
      // A list narrows the operator's destinations (and asks for network);
      // secrets ask for network too.
      network: allow ?? (a["network"] === true || secrets !== undefined),
      ...(secrets !== undefined ? { secrets } : {}),
      ...(typeof a["stdin"] === "string" ? { stdin: a["stdin"] } : {}),
      ...(workspace !== undefined ? { workspace: workspace as string } : {}),
      ...(readOnly === true ? { workspace_mode: "ro" as const } : {}),
      ...options,
    });
    return outcomeOf(r);
  } catch (e) {
    if (e instanceof BadArguments) return { text: `error: ${e.message}\n`, isError: true, images: [] };
    if (e instanceof APIError) {
      // A refused request (400, 404, 413, 429...) is for the model to read.
      return { text: `error: ${e.message}\n`, isError: true, images: [] };
    }
    throw e;
  }
}
