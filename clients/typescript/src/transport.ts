/**
 * The transport and the wire's shared types: how a request is sent (the
 * client's timeout, its retries of 429, errors as APIError subclasses) and
 * the options every call takes. PyExec and Session both import this module
 * and Session never imports the client, so the modules form no import
 * circle (test/imports.test.mjs checks it).
 */

import { APIError, ConnectionError, RateLimitError, TimeoutError, apiError } from "./errors.js";
import type { CellResult } from "./rich.js";

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

/** How one request is sent. */
export interface RequestOptions extends CallOptions {
  body?: BodyInit;
  contentType?: string;
  accept?: string;
  headers?: Record<string, string>;
  /** Bound by the client's timeout (false for streams). */
  timed?: boolean;
}

const DEFAULT_TIMEOUT_MS = 300_000;

/** Waits ms, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
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

/** A slash-separated path with each segment percent-encoded. */
export function escapeSegments(path: string): string {
  return path.replace(/^\/+/, "").split("/").map(encodeURIComponent).join("/");
}

/** The options of a request whose body is JSON. */
export function jsonBody(body: unknown): RequestOptions {
  return { body: JSON.stringify(body), contentType: "application/json" };
}

/** A session request: a JSON answer with the one status the API promises, or the raw bytes. */
export type SessionRequest = RequestOptions & { want?: number; raw?: boolean };

/** What a Session needs of its client: the session endpoints (PyExec has them). */
export interface SessionTransport {
  readonly baseUrl: string;
  sessionCall<T>(method: string, id: string, sub: string, init?: SessionRequest): Promise<T>;
  sessionCell(id: string, body: Record<string, unknown>, options: CallOptions): Promise<CellResult>;
}

/** Sends the requests of one client to one server. */
export class Transport {
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

  /**
   * Sends one request and returns the response of a 2xx answer; anything
   * else is thrown as an APIError subclass. A 429 is retried up to
   * maxRetries times after its Retry-After. With timed, the client's
   * timeout bounds the request, and `read` must consume the body within it.
   */
  async send<T>(method: string, path: string, init: RequestOptions, read: (r: Response) => Promise<T>): Promise<T> {
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

  private async sendOnce<T>(method: string, path: string, init: RequestOptions, read: (r: Response) => Promise<T>): Promise<T> {
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
  async json<T>(method: string, path: string, init: RequestOptions & { want?: number } = {}): Promise<T> {
    return this.send(method, path, init, async (r) => {
      if (init.want !== undefined && r.status !== init.want) {
        throw new APIError(r.status, `${method} ${path}: got HTTP ${r.status}, want ${init.want}`, null, `${method} ${path}`);
      }
      if (r.status === 204) return undefined as T;
      return (await r.json()) as T;
    });
  }
}
