/** Previews: a URL that opens a web app a session serves, in a browser, without the API key (a server with --preview). */

/** A preview URL of a session's port (Session.sharePort). */
export interface PortShare {
  /** Opens the app until expires_at, a revoke or the session's end; absolute (a path on the API's origin is made so against the client's base URL, without its user:password@). */
  url: string;
  session_id: string;
  port: number;
  /** RFC 3339. */
  expires_at: string;
  /** How the app is kept from the API's origin: sandbox, preview_host or per_preview (docs/preview.md). */
  isolation: string;
}

/** base without a user:password@ it may carry: a preview URL is made to be handed on, the client's credentials are not. */
export function withoutUserinfo(base: string): string {
  let u: URL;
  try {
    u = new URL(base);
  } catch {
    return base;
  }
  if (u.username === "" && u.password === "") return base;
  u.username = "";
  u.password = "";
  return u.toString().replace(/\/+$/, "");
}

/** The path of a port's share route below a session, or a RangeError for a number that is no TCP port. */
export function sharePath(port: number): string {
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new RangeError(`port ${port} is not a TCP port (1-65535)`);
  return `/ports/${port}/share`;
}
