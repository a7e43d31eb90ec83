/** The pyexec client: one class over fetch, for Node ≥ 18 and browsers alike. */

import { encodeBase64 } from "./base64.js";
import { APIError, ConnectionError, RateLimitError, StreamEndedError, TimeoutError, apiError } from "./errors.js";
import { CellResult, ExecutionResult } from "./rich.js";
import { Session } from "./session.js";
import { parseSSE } from "./sse.js";
import { detectEntrypoint, tarFromFiles } from "./tar.js";
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
} from "./types.js";

/** Options of a PyExec client. */
export interface ClientOptions {
  /** Sent as "Authorization: Bearer <key>". */
  apiKey?: string;
  /** Bound of each call in milliseconds (default 300 000; 0: none). follow() is not bounded by it. */
  timeoutMs?: number;
  /** How often a 429 answer is retried after its Retry-After (default 2; 0: never). */
  maxRetries?: number;
  /** The longest wait before a retry, in milliseconds (default 30 000). */
  maxRetryDelayMs?: number;
  /** A fetch implementation (default: the global fetch). */
  fetch?: typeof fetch;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
}

/** Per-call options. */
export interface CallOptions {
  /** Aborts the call. */
  signal?: AbortSignal;
}

/** Options of follow(). */
export interface FollowOptions extends CallOptions {
  /** Start after this seq (0: from the beginning, the server replays what it has). */
  after?: number;
  /** Reconnections in a row without a new event before giving up (default 5). */
  maxReconnects?: number;
  /** Wait before a reconnection in milliseconds (default 500, doubled each time up to 8 s). */
  reconnectDelayMs?: number;
}

interface RequestInit2 extends CallOptions {
  body?: BodyInit;
  contentType?: string;
  accept?: string;
  headers?: Record<string, string>;
  /** Bound by the client's timeout (false for streams). */
  timed?: boolean;
}

const DEFAULT_TIMEOUT_MS = 300_000;

/** Waits ms, or rejects with the signal's reason when it aborts first. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** The path of an execution, or of one of its files (each segment escaped). */
function executionPath(id: string, file?: string): string {
  const base = `/api/v1/executions/${encodeURIComponent(id)}`;
  return file === undefined ? base : `${base}/files/${escapeSegments(file)}`;
}

/** A slash-separated path with each segment percent-encoded. */
export function escapeSegments(path: string): string {
  return path.replace(/^\/+/, "").split("/").map(encodeURIComponent).join("/");
}

/** The config object of a request, from its convenience fields and config. */
function configOf(o: RunCommon): ExecConfig | undefined {
  const c: ExecConfig = { ...(o.config ?? {}) };
  if (o.timeout_seconds !== undefined) c.timeout_seconds = o.timeout_seconds;
  if (o.memory_mb !== undefined) c.memory_mb = o.memory_mb;
  if (o.disk_mb !== undefined) c.disk_mb = o.disk_mb;
  if (o.cpu_shares !== undefined) c.cpu_shares = o.cpu_shares;
  if (o.network !== undefined) c.network_disabled = !o.network;
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
export class PyExec {
  readonly baseUrl: string;
  private readonly apiKey: string | undefined;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly maxRetryDelayMs: number;
  private readonly fetchFn: typeof fetch;
  private readonly headers: Record<string, string>;

  constructor(baseUrl: string, options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.maxRetries = options.maxRetries ?? 2;
    this.maxRetryDelayMs = options.maxRetryDelayMs ?? 30_000;
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new Error("pyexec-client: no fetch (Node ≥ 18 or a browser is needed)");
    this.fetchFn = f.bind(globalThis);
    this.headers = options.headers ?? {};
  }

  // --- transport -----------------------------------------------------------

  /**
   * Sends one request and returns the response of a 2xx answer; anything
   * else is thrown as an APIError subclass. A 429 is retried up to
   * maxRetries times after its Retry-After. With timed, the client's
   * timeout bounds the request, and `read` must consume the body within it.
   */
  private async send<T>(method: string, path: string, init: RequestInit2, read: (r: Response) => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.sendOnce(method, path, init, read);
      } catch (e) {
        if (!(e instanceof RateLimitError) || attempt >= this.maxRetries) throw e;
        const wait = e.retryAfter !== null ? e.retryAfter * 1000 : 500 * 2 ** attempt;
        await sleep(Math.min(wait, this.maxRetryDelayMs), init.signal);
      }
    }
  }

  private async sendOnce<T>(method: string, path: string, init: RequestInit2, read: (r: Response) => Promise<T>): Promise<T> {
    const what = `${method} ${path}`;
    const ctl = new AbortController();
    const user = init.signal;
    const onAbort = (): void => ctl.abort(user?.reason);
    if (user?.aborted) throw user.reason;
    user?.addEventListener("abort", onAbort, { once: true });
    let timedOut = false;
    const timer =
      init.timed !== false && this.timeoutMs > 0
        ? setTimeout(() => {
            timedOut = true;
            ctl.abort(new TimeoutError(`${what}: no answer within ${this.timeoutMs} ms`));
          }, this.timeoutMs)
        : undefined;
    const headers: Record<string, string> = { Accept: init.accept ?? "application/json", ...this.headers, ...init.headers };
    if (init.contentType !== undefined) headers["Content-Type"] = init.contentType;
    if (this.apiKey) headers["Authorization"] = `Bearer ${this.apiKey}`;
    try {
      let resp: Response;
      try {
        // A stream outlives this call, so it listens to the caller's signal
        // itself rather than to a controller whose listener ends here.
        const signal = init.timed === false ? user ?? null : ctl.signal;
        resp = await this.fetchFn(this.baseUrl + path, { method, headers, body: init.body ?? null, signal });
      } catch (e) {
        if (timedOut) throw new TimeoutError(`${what}: no answer within ${this.timeoutMs} ms`, { cause: e });
        if (user?.aborted) throw user.reason;
        throw new ConnectionError(`${what}: ${(e as Error).message ?? e}`, { cause: e });
      }
      if (resp.status < 200 || resp.status > 299) {
        const text = await resp.text().catch(() => "");
        throw apiError(resp.status, resp.headers, text, what);
      }
      try {
        return await read(resp);
      } catch (e) {
        if (timedOut) throw new TimeoutError(`${what}: no complete answer within ${this.timeoutMs} ms`, { cause: e });
        throw e;
      }
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      user?.removeEventListener("abort", onAbort);
    }
  }

  /** A call whose JSON answer is decoded; want is the one success status the API promises. */
  private async json<T>(method: string, path: string, init: RequestInit2 & { want?: number } = {}): Promise<T> {
    return this.send(method, path, init, async (r) => {
      if (init.want !== undefined && r.status !== init.want) {
        throw new APIError(r.status, `${method} ${path}: got HTTP ${r.status}, want ${init.want}`, null, `${method} ${path}`);
      }
      if (r.status === 204) return undefined as T;
      return (await r.json()) as T;
    });
  }

  private jsonBody(body: unknown): RequestInit2 {
    return { body: JSON.stringify(body), contentType: "application/json" };
  }

  // --- executions ----------------------------------------------------------

  /** GET /health. */
  health(options: CallOptions = {}): Promise<Health> {
    return this.json("GET", "/health", options);
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
    const raw = await this.json<ExecutionResultData>("POST", "/api/v1/eval", { ...this.jsonBody(body), signal: req.signal });
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
    const raw = await this.json<ExecutionResultData>("POST", "/api/v1/exec/sync", {
      body: this.multipart(project, options),
      signal: options.signal,
    });
    return new ExecutionResult(raw);
  }

  /** Queues a project (as run takes it) and returns its execution id at once (HTTP 202). */
  async submit(project: Project, options: RunOptions & CallOptions = {}): Promise<string> {
    const res = await this.json<{ execution_id?: string }>("POST", "/api/v1/exec/async", {
      body: this.multipart(project, options),
      signal: options.signal,
      want: 202,
    });
    if (!res.execution_id) throw new APIError(202, "POST /api/v1/exec/async: the answer has no execution_id", res, "POST /api/v1/exec/async");
    return res.execution_id;
  }

  /** The current state of an execution, with its output so far. */
  async getExecution(id: string, options: CallOptions = {}): Promise<ExecutionResult> {
    return new ExecutionResult(await this.json<ExecutionResultData>("GET", executionPath(id), options));
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
    const page = await this.json<ExecutionList<ExecutionResultData>>("GET", "/api/v1/executions" + (qs ? "?" + qs : ""), options);
    const out: ExecutionList<ExecutionResult> = { executions: (page.executions ?? []).map((r) => new ExecutionResult(r)) };
    if (page.next_cursor) out.next_cursor = page.next_cursor;
    return out;
  }

  /** Kills an execution; returns "killed", or the state it was already in. */
  async kill(id: string, options: CallOptions = {}): Promise<ExecutionStatus> {
    const res = await this.json<{ status: ExecutionStatus }>("DELETE", executionPath(id), options);
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
        body = await this.send("GET", path, {
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
    const res = await this.json<{ files?: FileInfo[] }>("GET", executionPath(id) + "/files", options);
    return res.files ?? [];
  }

  /** The bytes of one file an execution produced, by its listed path. */
  downloadFile(id: string, path: string, options: CallOptions = {}): Promise<Uint8Array> {
    return this.send("GET", executionPath(id, path), { accept: "*/*", signal: options.signal }, async (r) => new Uint8Array(await r.arrayBuffer()));
  }

  // --- lint and tools ------------------------------------------------------

  /** ruff's diagnostics for code or files, without running anything. */
  async lint(code: string | LintRequest, options: CallOptions = {}): Promise<Diagnostic[]> {
    const req: LintRequest = typeof code === "string" ? { code } : code;
    const body: Record<string, unknown> = { ...req };
    if (req.files !== undefined) body["files"] = codeFiles(req.files);
    return (await this.json<Diagnostic[] | null>("POST", "/api/v1/lint", { ...this.jsonBody(body), signal: options.signal })) ?? [];
  }

  /**
   * Tool definitions for model function calling (GET /api/v1/tools):
   * "openai" (Chat Completions), "openai-responses" or "anthropic";
   * strict: OpenAI strict-mode schemas.
   */
  async tools(format: ToolFormat = "openai", options: CallOptions & { strict?: boolean } = {}): Promise<Record<string, unknown>[]> {
    const q = new URLSearchParams({ format });
    if (options.strict) q.set("strict", "true");
    return (await this.json<ToolList>("GET", `/api/v1/tools?${q}`, options)).tools;
  }

  // --- sessions ------------------------------------------------------------

  /** Starts a session: a persistent interpreter whose variables and files outlive each cell. */
  async createSession(opts: SessionOptions = {}, options: CallOptions = {}): Promise<Session> {
    const { network, ...rest } = opts;
    const body: Record<string, unknown> = { ...rest };
    if (network !== undefined) body["network_disabled"] = !network;
    const info = await this.json<SessionInfo>("POST", "/api/v1/sessions", { ...this.jsonBody(body), signal: options.signal, want: 201 });
    return new Session(this, info.session_id, info);
  }

  /** A handle on an existing session (no request is made). */
  session(id: string): Session {
    return new Session(this, id);
  }

  /** The caller's live sessions, oldest first. */
  async listSessions(options: CallOptions = {}): Promise<SessionInfo[]> {
    return (await this.json<{ sessions?: SessionInfo[] }>("GET", "/api/v1/sessions", options)).sessions ?? [];
  }

  /** @internal The session endpoints, used by Session. */
  sessionCall<T>(method: string, id: string, sub: string, init: RequestInit2 & { want?: number; raw?: boolean } = {}): Promise<T> {
    const path = `/api/v1/sessions/${encodeURIComponent(id)}${sub}`;
    if (init.raw) return this.send(method, path, { ...init, accept: "*/*" }, async (r) => new Uint8Array(await r.arrayBuffer()) as T);
    return this.json<T>(method, path, init);
  }

  /** @internal */
  sessionCell(id: string, body: Record<string, unknown>, options: CallOptions): Promise<CellResult> {
    return this.sessionCall<ConstructorParameters<typeof CellResult>[0]>("POST", id, "/execute", {
      ...this.jsonBody(body),
      signal: options.signal,
    }).then((raw) => new CellResult(raw));
  }
}
