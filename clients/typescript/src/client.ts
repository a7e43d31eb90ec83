/** The pyexec client: one class over fetch, for Node ≥ 18 and browsers alike. */

import { encodeBase64 } from "./base64.js";
import { APIError, ConnectionError, StreamEndedError } from "./errors.js";
import { CellResult, ExecutionResult } from "./rich.js";
import { Session } from "./session.js";
import type { SnapshotInfo } from "./snapshots.js";
import { parseSSE } from "./sse.js";
import { detectEntrypoint, tarFromFiles } from "./tar.js";
import {
  Transport,
  escapeSegments,
  jsonBody,
  sleep,
  type CallOptions,
  type ClientOptions,
  type SessionRequest,
  type SessionTransport,
} from "./transport.js";
import {
  isFinal,
  type CodeFile,
  type Diagnostic,
  type EvalRequest,
  type ExecConfig,
  type ExecutionEvent,
  type ExecutionList,
  type ExecutionResultData,
  type ExecutionStatus,
  type FileInfo,
  type Health,
  type LintRequest,
  type Project,
  type RunCommon,
  type RunOptions,
  type SessionInfo,
  type SessionOptions,
  type ToolFormat,
  type ToolList,
  type Workspace,
  type WorkspaceCommit,
  type WorkspaceFile,
  type WorkspaceVersion,
} from "./types.js";

/** Options of follow(). */
export interface FollowOptions extends CallOptions {
  /** Start after this seq (0: from the beginning, the server replays what it has). */
  after?: number;
  /** Reconnections in a row without a new event before giving up (default 5). */
  maxReconnects?: number;
  /** Wait before a reconnection in milliseconds (default 500, doubled each time up to 8 s). */
  reconnectDelayMs?: number;
}

/** The path of an execution, or of one of its files (each segment escaped). */
function executionPath(id: string, file?: string): string {
  const base = `/api/v1/executions/${encodeURIComponent(id)}`;
  return file === undefined ? base : `${base}/files/${escapeSegments(file)}`;
}

/** The path of a workspace, or of one of its files (each segment escaped), with a query. */
function workspacePath(name: string, sub = "", query: Record<string, string | number | undefined> = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== "") q.set(k, String(v));
  const qs = q.toString();
  return `/api/v1/workspaces/${encodeURIComponent(name)}${sub}` + (qs ? "?" + qs : "");
}

/** Options of the workspace reads: a kept version instead of the current one. */
export interface WorkspaceReadOptions extends CallOptions {
  version?: number;
}

/** Options of listWorkspaces. */
export interface ListWorkspacesOptions extends CallOptions {
  /** Every key's workspaces (operator keys; another key gets its own). */
  all?: boolean;
}

/** Options of workspaceFiles. */
export interface WorkspaceFilesOptions extends WorkspaceReadOptions {
  /** The key that owns the workspace (operator keys only; default: yours). */
  owner?: string;
}

/** The config object of a request, from its convenience fields and config. */
function configOf(o: RunCommon): ExecConfig | undefined {
  const c: ExecConfig = { ...(o.config ?? {}) };
  if (o.timeout_seconds !== undefined) c.timeout_seconds = o.timeout_seconds;
  if (o.memory_mb !== undefined) c.memory_mb = o.memory_mb;
  if (o.disk_mb !== undefined) c.disk_mb = o.disk_mb;
  if (o.cpu_shares !== undefined) c.cpu_shares = o.cpu_shares;
  if (Array.isArray(o.network)) {
    c.network_disabled = false;
    c.network = { allow: [...o.network] };
  } else if (o.network !== undefined) {
    c.network_disabled = !o.network;
  }
  if (o.secrets !== undefined && o.secrets.length > 0) {
    c.secrets = [...o.secrets];
    c.network_disabled ??= false;
  }
  if (o.workspace !== undefined) c.workspace = o.workspace;
  if (o.workspace_mode !== undefined) c.workspace_mode = o.workspace_mode;
  return Object.keys(c).length > 0 ? c : undefined;
}

/** The rich and shared fields of an eval body or exec metadata. */
function commonFields(o: RunCommon): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (o.stdin !== undefined) out["stdin"] = o.stdin;
  if (o.requirements !== undefined) out["requirements_txt"] = o.requirements;
  if (o.lint !== undefined) out["lint"] = o.lint;
  if (o.dataframes !== undefined) out["dataframes"] = o.dataframes;
  if (o.collect !== undefined) out["collect"] = o.collect;
  if (o.figure_format !== undefined) out["figure_format"] = o.figure_format;
  if (o.max_rows !== undefined) out["max_rows"] = o.max_rows;
  const config = configOf(o);
  if (config !== undefined) out["config"] = config;
  return out;
}

/** Files as the wire's CodeFile list; bytes travel as base64. */
export function codeFiles(files: CodeFile[] | Record<string, string | Uint8Array>): CodeFile[] {
  if (Array.isArray(files)) return files;
  return Object.entries(files).map(([name, content]) =>
    typeof content === "string" ? { name, content } : { name, content: encodeBase64(content), encoding: "base64" },
  );
}

/**
 * A client of one pyexec (or python-executor) server.
 *
 *     const px = new PyExec("http://localhost:8080", { apiKey });
 *     const r = await px.eval("print('hi')\n6 * 7", { eval_last_expr: true });
 *     r.stdout; // "hi\n"
 *     r.result; // "42"
 */
export class PyExec implements SessionTransport {
  readonly baseUrl: string;
  private readonly transport: Transport;

  constructor(baseUrl: string, options: ClientOptions = {}) {
    this.transport = new Transport(baseUrl, options);
    this.baseUrl = this.transport.baseUrl;
  }

  // --- executions ----------------------------------------------------------

  /** GET /health. */
  health(options: CallOptions = {}): Promise<Health> {
    return this.transport.json("GET", "/health", options);
  }

  /**
   * Runs code (as main.py) or files, sent as JSON, and waits for the result.
   *
   *     await px.eval("import sys; print(sys.version)")
   *     await px.eval({ files: { "main.py": code, "data.bin": bytes }, requirements: "numpy\n" })
   */
  async eval(code: string | EvalRequest, options: EvalRequest & CallOptions = {}): Promise<ExecutionResult> {
    const req: EvalRequest & CallOptions = typeof code === "string" ? { ...options, code } : { ...code, ...options };
    const body: Record<string, unknown> = commonFields(req);
    if (req.files !== undefined) {
      const files = codeFiles(req.files);
      const entry = req.entrypoint ?? "main.py";
      if (req.code !== undefined && !files.some((f) => f.name === entry)) files.unshift({ name: entry, content: req.code });
      body["files"] = files;
    } else if (req.code !== undefined) {
      body["code"] = req.code;
    }
    if (req.entrypoint !== undefined) body["entrypoint"] = req.entrypoint;
    if (req.python_version !== undefined) body["python_version"] = req.python_version;
    if (req.eval_last_expr !== undefined) body["eval_last_expr"] = req.eval_last_expr;
    const raw = await this.transport.json<ExecutionResultData>("POST", "/api/v1/eval", { ...jsonBody(body), signal: req.signal });
    return new ExecutionResult(raw);
  }

  /** The multipart body of run and submit: the metadata JSON and the tar. */
  private multipart(project: Project, options: RunOptions): FormData {
    let tar: Uint8Array;
    let entrypoint = options.entrypoint;
    if (typeof project === "string") {
      tar = tarFromFiles({ [entrypoint ?? "main.py"]: project });
    } else if (project instanceof Uint8Array || project instanceof ArrayBuffer) {
      tar = project instanceof ArrayBuffer ? new Uint8Array(project) : project;
    } else {
      tar = tarFromFiles(project);
      entrypoint ??= detectEntrypoint(Object.keys(project));
      if (entrypoint === undefined) throw new Error("run: no Python file among the files, and no entrypoint given");
    }
    const meta: Record<string, unknown> = commonFields(options);
    if (entrypoint !== undefined) meta["entrypoint"] = entrypoint;
    if (options.python_version !== undefined) meta["docker_image"] = `python:${options.python_version}`;
    if (options.args !== undefined) meta["script_args"] = options.args;
    if (options.env !== undefined) meta["env_vars"] = Object.entries(options.env).map(([k, v]) => `${k}=${v}`);
    if (options.pre_commands !== undefined) meta["pre_commands"] = options.pre_commands;
    const form = new FormData();
    form.append("metadata", JSON.stringify(meta));
    // A copy backed by a plain ArrayBuffer, as Blob wants.
    form.append("tar", new Blob([tar.slice()], { type: "application/x-tar" }), "code.tar");
    return form;
  }

  /**
   * Runs a project and waits for the result: Python source (run as
   * main.py), a map of files (path → text or bytes), or an uncompressed tar.
   */
  async run(project: Project, options: RunOptions & CallOptions = {}): Promise<ExecutionResult> {
    const raw = await this.transport.json<ExecutionResultData>("POST", "/api/v1/exec/sync", {
      body: this.multipart(project, options),
      signal: options.signal,
    });
    return new ExecutionResult(raw);
  }

  /** Queues a project (as run takes it) and returns its execution id at once (HTTP 202). */
  async submit(project: Project, options: RunOptions & CallOptions = {}): Promise<string> {
    const res = await this.transport.json<{ execution_id?: string }>("POST", "/api/v1/exec/async", {
      body: this.multipart(project, options),
      signal: options.signal,
      want: 202,
    });
    if (!res.execution_id) throw new APIError(202, "POST /api/v1/exec/async: the answer has no execution_id", res, "POST /api/v1/exec/async");
    return res.execution_id;
  }

  /** The current state of an execution, with its output so far. */
  async getExecution(id: string, options: CallOptions = {}): Promise<ExecutionResult> {
    return new ExecutionResult(await this.transport.json<ExecutionResultData>("GET", executionPath(id), options));
  }

  /** One page of the caller's executions, most recent first; pass next_cursor as cursor for the next. */
  async listExecutions(
    query: { status?: ExecutionStatus; limit?: number; cursor?: string } = {},
    options: CallOptions = {},
  ): Promise<ExecutionList<ExecutionResult>> {
    const q = new URLSearchParams();
    if (query.status) q.set("status", query.status);
    if (query.limit) q.set("limit", String(query.limit));
    if (query.cursor) q.set("cursor", query.cursor);
    const qs = q.toString();
    const page = await this.transport.json<ExecutionList<ExecutionResultData>>("GET", "/api/v1/executions" + (qs ? "?" + qs : ""), options);
    const out: ExecutionList<ExecutionResult> = { executions: (page.executions ?? []).map((r) => new ExecutionResult(r)) };
    if (page.next_cursor) out.next_cursor = page.next_cursor;
    return out;
  }

  /** Kills an execution; returns "killed", or the state it was already in. */
  async kill(id: string, options: CallOptions = {}): Promise<ExecutionStatus> {
    const res = await this.transport.json<{ status: ExecutionStatus }>("DELETE", executionPath(id), options);
    return res.status;
  }

  /** Polls an execution until it is final (follow() streams the same without polling). */
  async waitForCompletion(id: string, options: CallOptions & { pollIntervalMs?: number } = {}): Promise<ExecutionResult> {
    for (;;) {
      const r = await this.getExecution(id, options);
      if (isFinal(r.status)) return r;
      await sleep(options.pollIntervalMs ?? 1000, options.signal);
    }
  }

  /**
   * The live events of an execution (stdout, stderr, status, install,
   * display), from the start or after options.after. The iteration ends
   * after the final status event. A connection that breaks is reopened
   * with Last-Event-ID set to the last seq seen, so no event is lost or
   * repeated; StreamEndedError ends it when that keeps failing.
   *
   *     for await (const ev of px.follow(id)) if (ev.type === "stdout") process.stdout.write(ev.data);
   */
  async *follow(id: string, options: FollowOptions = {}): AsyncGenerator<ExecutionEvent, void, undefined> {
    let after = options.after ?? 0;
    const maxReconnects = options.maxReconnects ?? 5;
    const baseDelay = options.reconnectDelayMs ?? 500;
    let failures = 0;
    let lastError: unknown;
    const path = executionPath(id) + "/events";
    for (;;) {
      let body: ReadableStream<Uint8Array> | null = null;
      try {
        body = await this.transport.send("GET", path, {
          accept: "text/event-stream",
          headers: after > 0 ? { "Last-Event-ID": String(after) } : {},
          signal: options.signal,
          timed: false,
        }, async (r) => r.body);
      } catch (e) {
        if (!(e instanceof ConnectionError)) throw e;
        lastError = e;
      }
      if (body !== null) {
        try {
          for await (const msg of parseSSE(body)) {
            const ev = JSON.parse(msg.data) as ExecutionEvent;
            if (!ev.type) ev.type = msg.event;
            if (!ev.seq && msg.id) ev.seq = Number(msg.id);
            if (ev.seq <= after) continue; // already seen before a reconnection
            after = ev.seq;
            failures = 0;
            yield ev;
            if (ev.type === "status" && isFinal(ev.data)) return;
          }
          lastError = new StreamEndedError(`following ${id}: the stream ended before the final status`);
        } catch (e) {
          if (options.signal?.aborted) throw options.signal.reason;
          if (e instanceof SyntaxError) throw e;
          lastError = e;
        }
      }
      if (failures >= maxReconnects) {
        throw new StreamEndedError(`following ${id}: gave up after ${failures} reconnections at seq ${after}`, {
          cause: lastError,
        });
      }
      await sleep(Math.min(baseDelay * 2 ** failures, 8000), options.signal);
      failures++;
    }
  }

  // --- files ---------------------------------------------------------------

  /** The files an execution produced. */
  async listFiles(id: string, options: CallOptions = {}): Promise<FileInfo[]> {
    const res = await this.transport.json<{ files?: FileInfo[] }>("GET", executionPath(id) + "/files", options);
    return res.files ?? [];
  }

  /** The bytes of one file an execution produced, by its listed path. */
  downloadFile(id: string, path: string, options: CallOptions = {}): Promise<Uint8Array> {
    return this.transport.send("GET", executionPath(id, path), { accept: "*/*", signal: options.signal }, async (r) => new Uint8Array(await r.arrayBuffer()));
  }

  // --- workspaces ----------------------------------------------------------
  // Named file trees of the key that outlive runs: a run or session given
  // workspace sees one at /workspace (docs/workspaces.md). Another key's
  // workspace is a NotFoundError, as an unknown one.

  /** Creates an empty workspace (version 0); quota_mb defaults to the server's. */
  createWorkspace(name: string, opts: { quota_mb?: number } = {}, options: CallOptions = {}): Promise<Workspace> {
    return this.transport.json("POST", "/api/v1/workspaces", { ...jsonBody({ name, ...opts }), signal: options.signal, want: 201 });
  }

  /** The caller's workspaces; with all, an operator key's list has every key's. */
  async listWorkspaces(options: ListWorkspacesOptions = {}): Promise<Workspace[]> {
    const path = "/api/v1/workspaces" + (options.all ? "?all=true" : "");
    return (await this.transport.json<{ workspaces?: Workspace[] }>("GET", path, { signal: options.signal })).workspaces ?? [];
  }

  /** One workspace and its current version. */
  getWorkspace(name: string, options: CallOptions = {}): Promise<Workspace> {
    return this.transport.json("GET", workspacePath(name), options);
  }

  /** Deletes a workspace with all its versions. */
  async deleteWorkspace(name: string, options: CallOptions = {}): Promise<void> {
    await this.transport.json("DELETE", workspacePath(name), { ...options, want: 204 });
  }

  /** The kept versions, oldest first. */
  async workspaceVersions(name: string, options: CallOptions = {}): Promise<WorkspaceVersion[]> {
    return (await this.transport.json<{ versions?: WorkspaceVersion[] }>("GET", workspacePath(name, "/versions"), options)).versions ?? [];
  }

  /** Makes a new version equal to a kept one. */
  restoreWorkspace(name: string, version: number, options: CallOptions = {}): Promise<WorkspaceCommit> {
    return this.transport.json("POST", workspacePath(name, "/restore"), { ...jsonBody({ version }), signal: options.signal });
  }

  /** The entries below dir (all of it by default); owner names another key's workspace (operator keys). */
  async workspaceFiles(name: string, dir = "", options: WorkspaceFilesOptions = {}): Promise<WorkspaceFile[]> {
    const path = workspacePath(name, "/files", { dir, version: options.version, owner: options.owner });
    return (await this.transport.json<{ files?: WorkspaceFile[] }>("GET", path, { signal: options.signal })).files ?? [];
  }

  /** The bytes of one file. */
  readWorkspaceFile(name: string, path: string, options: WorkspaceReadOptions = {}): Promise<Uint8Array> {
    const p = workspacePath(name, "/files/" + escapeSegments(path), { version: options.version });
    return this.transport.send("GET", p, { accept: "*/*", signal: options.signal }, async (r) => new Uint8Array(await r.arrayBuffer()));
  }

  /** Writes one file (text is UTF-8), making the folders above it: a new version. */
  writeWorkspaceFile(name: string, path: string, data: string | Uint8Array, options: CallOptions = {}): Promise<WorkspaceCommit> {
    const body = typeof data === "string" ? data : new Blob([data.slice()]);
    return this.transport.json("PUT", workspacePath(name, "/files/" + escapeSegments(path)), {
      body,
      contentType: "application/octet-stream",
      signal: options.signal,
    });
  }

  /**
   * Unpacks files into the folder dir (the top by default), all or
   * nothing, as one version: a map of files (path → text or bytes) or a tar
   * (gzip accepted).
   */
  uploadWorkspace(
    name: string,
    files: Record<string, string | Uint8Array> | Uint8Array,
    options: CallOptions & { dir?: string } = {},
  ): Promise<WorkspaceCommit> {
    const tar = files instanceof Uint8Array ? files : tarFromFiles(files);
    return this.transport.json("POST", workspacePath(name, "/archive", { dir: options.dir }), {
      body: new Blob([tar.slice()]),
      contentType: "application/x-tar",
      signal: options.signal,
    });
  }

  /** A tar of the folder dir (all of it by default). */
  downloadWorkspace(name: string, dir = "", options: WorkspaceReadOptions = {}): Promise<Uint8Array> {
    const p = workspacePath(name, "/archive", { dir, version: options.version });
    return this.transport.send("GET", p, { accept: "*/*", signal: options.signal }, async (r) => new Uint8Array(await r.arrayBuffer()));
  }

  /** Deletes a file, or a folder with what it holds: a new version. */
  removeWorkspaceFile(name: string, path: string, options: CallOptions = {}): Promise<WorkspaceCommit> {
    return this.transport.json("DELETE", workspacePath(name, "/files/" + escapeSegments(path)), options);
  }

  // --- lint and tools ------------------------------------------------------

  /** ruff's diagnostics for code or files, without running anything. */
  async lint(code: string | LintRequest, options: CallOptions = {}): Promise<Diagnostic[]> {
    const req: LintRequest = typeof code === "string" ? { code } : code;
    const body: Record<string, unknown> = { ...req };
    if (req.files !== undefined) body["files"] = codeFiles(req.files);
    return (await this.transport.json<Diagnostic[] | null>("POST", "/api/v1/lint", { ...jsonBody(body), signal: options.signal })) ?? [];
  }

  /**
   * Tool definitions for model function calling (GET /api/v1/tools):
   * "openai" (Chat Completions), "openai-responses" or "anthropic";
   * strict: OpenAI strict-mode schemas.
   */
  async tools(format: ToolFormat = "openai", options: CallOptions & { strict?: boolean } = {}): Promise<Record<string, unknown>[]> {
    const q = new URLSearchParams({ format });
    if (options.strict) q.set("strict", "true");
    return (await this.transport.json<ToolList>("GET", `/api/v1/tools?${q}`, options)).tools;
  }

  // --- sessions ------------------------------------------------------------

  /** Starts a session: a persistent interpreter whose variables and files outlive each cell. */
  async createSession(opts: SessionOptions = {}, options: CallOptions = {}): Promise<Session> {
    const { network, network_allow, secrets, ...rest } = opts;
    const body: Record<string, unknown> = { ...rest };
    if (network !== undefined) body["network_disabled"] = !network;
    if (network_allow !== undefined && network_allow.length > 0) {
      body["network"] = { allow: [...network_allow] };
      body["network_disabled"] ??= false;
    }
    if (secrets !== undefined && secrets.length > 0) {
      body["secrets"] = [...secrets];
      body["network_disabled"] ??= false;
    }
    const info = await this.transport.json<SessionInfo>("POST", "/api/v1/sessions", { ...jsonBody(body), signal: options.signal, want: 201 });
    return new Session(this, info.session_id, info);
  }

  /** A handle on an existing session (no request is made). */
  session(id: string): Session {
    return new Session(this, id);
  }

  /** The caller's live sessions, oldest first. */
  async listSessions(options: CallOptions = {}): Promise<SessionInfo[]> {
    return (await this.transport.json<{ sessions?: SessionInfo[] }>("GET", "/api/v1/sessions", options)).sessions ?? [];
  }

  /** Your snapshots (Session.snapshot()), oldest first. */
  async listSnapshots(options: CallOptions = {}): Promise<SnapshotInfo[]> {
    return (await this.transport.json<{ snapshots?: SnapshotInfo[] }>("GET", "/api/v1/snapshots", options)).snapshots ?? [];
  }

  /** Deletes a snapshot; an unknown one (or another key's) is a NotFoundError. */
  async deleteSnapshot(id: string, options: CallOptions = {}): Promise<void> {
    await this.transport.json("DELETE", `/api/v1/snapshots/${encodeURIComponent(id)}`, { ...options, want: 204 });
  }

  /** @internal The session endpoints, used by Session. */
  sessionCall<T>(method: string, id: string, sub: string, init: SessionRequest = {}): Promise<T> {
    const path = `/api/v1/sessions/${encodeURIComponent(id)}${sub}`;
    if (init.raw) return this.transport.send(method, path, { ...init, accept: "*/*" }, async (r) => new Uint8Array(await r.arrayBuffer()) as T);
    return this.transport.json<T>(method, path, init);
  }

  /** @internal */
  sessionCell(id: string, body: Record<string, unknown>, options: CallOptions): Promise<CellResult> {
    return this.sessionCall<ConstructorParameters<typeof CellResult>[0]>("POST", id, "/execute", {
      ...jsonBody(body),
      signal: options.signal,
    }).then((raw) => new CellResult(raw));
  }
}
