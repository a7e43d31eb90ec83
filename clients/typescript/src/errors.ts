/**
 * Errors of the pyexec client. Every failure is a PyExecError; an HTTP
 * answer outside 2xx is an APIError whose subclass names the status, so
 * callers can `catch (e) { if (e instanceof RateLimitError) ... }`.
 */

/** The base class of every error this client throws. */
export class PyExecError extends Error {
  override name = "PyExecError";
}

/** A non-2xx answer of the server; `message` is the server's `error`. */
export class APIError extends PyExecError {
  override name = "APIError";
  /** The HTTP status code, e.g. 404. */
  readonly status: number;
  /** The decoded JSON body, or the text when it was not JSON. */
  readonly body: unknown;
  /** The request that failed, e.g. "GET /api/v1/executions/exe_…". */
  readonly request: string;

  constructor(status: number, message: string, body: unknown, request: string) {
    super(message);
    this.status = status;
    this.body = body;
    this.request = request;
  }
}

/** 400: a malformed request or a field the server refused. */
export class BadRequestError extends APIError {
  override name = "BadRequestError";
}

/** 401: no API key, or a key the server does not know. */
export class AuthenticationError extends APIError {
  override name = "AuthenticationError";
}

/** 404: an unknown execution, session or file (or another key's). */
export class NotFoundError extends APIError {
  override name = "NotFoundError";
}

/** 409: the session is busy with another cell. */
export class ConflictError extends APIError {
  override name = "ConflictError";
}

/** 413: code, files or the request body over the server's limits. */
export class PayloadTooLargeError extends APIError {
  override name = "PayloadTooLargeError";
}

/** 429: the server is at capacity (queue, sessions or event streams). */
export class RateLimitError extends APIError {
  override name = "RateLimitError";
  /** Seconds the server asked to wait (its Retry-After), or null. */
  readonly retryAfter: number | null;

  constructor(status: number, message: string, body: unknown, request: string, retryAfter: number | null) {
    super(status, message, body, request);
    this.retryAfter = retryAfter;
  }
}

/** 5xx: the server failed. */
export class InternalServerError extends APIError {
  override name = "InternalServerError";
}

/** The server could not be reached, or the connection broke. */
export class ConnectionError extends PyExecError {
  override name = "ConnectionError";
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** The client's own timeout (timeoutMs) ended a request. */
export class TimeoutError extends PyExecError {
  override name = "TimeoutError";
}

/** An event stream ended before the final status, and reconnecting failed. */
export class StreamEndedError extends PyExecError {
  override name = "StreamEndedError";
}

/**
 * Parses a Retry-After header: delay-seconds or an HTTP date. Returns
 * seconds, or null when there is none or it cannot be read.
 */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | null {
  if (value === null) return null;
  const v = value.trim();
  if (v === "") return null;
  if (/^\d+$/.test(v)) return Number(v);
  const at = Date.parse(v);
  if (Number.isNaN(at)) return null;
  return Math.max(0, Math.ceil((at - now) / 1000));
}

/** Builds the APIError of a non-2xx answer from its status, headers and body text. */
export function apiError(status: number, headers: Headers, text: string, request: string): APIError {
  let body: unknown = text;
  let message = "";
  try {
    body = JSON.parse(text);
    if (body && typeof body === "object") {
      const b = body as Record<string, unknown>;
      for (const k of ["error", "detail", "title"]) {
        if (typeof b[k] === "string" && b[k] !== "") {
          message = b[k] as string;
          break;
        }
      }
    }
  } catch {
    const t = text.trim();
    if (t !== "" && !t.startsWith("<")) message = t.slice(0, 1000);
  }
  if (message === "") message = `HTTP ${status}`;
  switch (status) {
    case 400:
      return new BadRequestError(status, message, body, request);
    case 401:
      return new AuthenticationError(status, message, body, request);
    case 404:
      return new NotFoundError(status, message, body, request);
    case 409:
      return new ConflictError(status, message, body, request);
    case 413:
      return new PayloadTooLargeError(status, message, body, request);
    case 429:
      return new RateLimitError(status, message, body, request, parseRetryAfter(headers.get("Retry-After")));
  }
  if (status >= 500) return new InternalServerError(status, message, body, request);
  return new APIError(status, message, body, request);
}
