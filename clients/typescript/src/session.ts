/** Sessions: a persistent interpreter, like a notebook kernel. */

import type { CellResult } from "./rich.js";
import { escapeSegments, type CallOptions, type SessionTransport } from "./transport.js";
import type { SnapshotSaved } from "./snapshots.js";
import { sharePath, withoutUserinfo, type PortShare } from "./previews.js";
import type { SessionFile, SessionInfo } from "./types.js";

/** Options of one cell. */
export interface CellOptions extends CallOptions {
  /** Return the repr of a final expression in result (the server's default is true). */
  eval_last_expr?: boolean;
  timeout_seconds?: number;
}

/**
 * A session of a PyExec client. Variables, imports and files stay between
 * cells until close() (or the server's idle timeout).
 *
 *     const s = await px.createSession();
 *     await s.execute("x = 41");
 *     (await s.execute("x + 1")).result; // "42"
 *     await s.close();
 */
export class Session {
  readonly id: string;
  /** What the server said when the session was created (undefined for a handle from px.session(id)). */
  readonly created: SessionInfo | undefined;
  private readonly px: SessionTransport;

  constructor(px: SessionTransport, id: string, created?: SessionInfo) {
    this.px = px;
    this.id = id;
    this.created = created;
  }

  /** The session's state now: idle, busy or hibernated, execution count, memory in use. */
  info(options: CallOptions = {}): Promise<SessionInfo> {
    return this.px.sessionCall("GET", this.id, "", options);
  }

  /** Runs one cell; a cell already running is a ConflictError. */
  execute(code: string, options: CellOptions = {}): Promise<CellResult> {
    const body: Record<string, unknown> = { code };
    if (options.eval_last_expr !== undefined) body["eval_last_expr"] = options.eval_last_expr;
    if (options.timeout_seconds !== undefined) body["timeout_seconds"] = options.timeout_seconds;
    return this.px.sessionCell(this.id, body, options);
  }

  /** Raises KeyboardInterrupt in the running cell; the session survives. */
  interrupt(options: CallOptions = {}): Promise<SessionInfo> {
    return this.px.sessionCall("POST", this.id, "/interrupt", options);
  }

  /** A fresh interpreter: variables are gone, files stay. */
  restart(options: CallOptions = {}): Promise<SessionInfo> {
    return this.px.sessionCall("POST", this.id, "/restart", options);
  }

  /** Writes a file into the session's workspace. */
  async upload(path: string, data: string | Uint8Array, options: CallOptions = {}): Promise<void> {
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    await this.px.sessionCall("PUT", this.id, `/files/${escapeSegments(path)}`, {
      body: new Blob([bytes.slice()]),
      contentType: "application/octet-stream",
      signal: options.signal,
      want: 201,
    });
  }

  /** The files of the session's workspace. */
  async files(options: CallOptions = {}): Promise<SessionFile[]> {
    return (await this.px.sessionCall<{ files?: SessionFile[] }>("GET", this.id, "/files", options)).files ?? [];
  }

  /** The bytes of a file of the session's workspace. */
  download(path: string, options: CallOptions = {}): Promise<Uint8Array> {
    return this.px.sessionCall("GET", this.id, `/files/${escapeSegments(path)}`, { ...options, raw: true });
  }

  /**
   * Saves the session's variables, imports and files as a snapshot of your
   * key; px.createSession({ from_snapshot }) restores it, later or on
   * another server of the fleet. The session goes on unchanged.
   */
  snapshot(options: CallOptions = {}): Promise<SnapshotSaved> {
    return this.px.sessionCall("POST", this.id, "/snapshot", { ...options, want: 201 });
  }

  /** A new session holding a copy of this one's variables and files; the two then diverge. */
  async fork(options: CallOptions = {}): Promise<Session> {
    const info = await this.px.sessionCall<SessionInfo>("POST", this.id, "/fork", { ...options, want: 201 });
    return new Session(this.px, info.session_id, info);
  }

  /**
   * A preview URL of the web app the session serves on port: it opens the
   * app in a browser without the API key until it expires, is revoked or
   * the session ends. Needs a server started with --preview (else 501).
   */
  async sharePort(port: number, options: CallOptions = {}): Promise<PortShare> {
    const share = await this.px.sessionCall<PortShare>("POST", this.id, sharePath(port), { ...options, want: 201 });
    if (share.url.startsWith("/")) share.url = withoutUserinfo(this.px.baseUrl) + share.url;
    return share;
  }

  /** Revokes every preview URL of port; resolves to how many still worked. */
  async revokePort(port: number, options: CallOptions = {}): Promise<number> {
    const out = await this.px.sessionCall<{ revoked: number }>("DELETE", this.id, sharePath(port), options);
    return out.revoked;
  }

  /** Ends the session and removes its files. */
  async close(options: CallOptions = {}): Promise<void> {
    await this.px.sessionCall("DELETE", this.id, "", { ...options, want: 204 });
  }
}
