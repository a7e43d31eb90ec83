// Package preview lets a browser reach a web app that a session serves
// inside its jail, and keeps the app away from everything else the browser
// holds. It owns the words and rules of a preview: the strict reading of
// a port (ParsePort), preview URLs — each bound to one session's port,
// signed with the server's key (LoadKey), naming the node that issued it
// (Issuer, so that any node can tell where to send it), expiring and
// revocable, capped
// per port and per key, held in memory, closing the connections opened
// through them when they end (Shares) — the origin previews are served on (Origin), the limits
// of a preview (connections, bytes, idle time: Meter) and the HTTP/1.1 and
// WebSocket reverse proxy that strips the viewer's credentials and, on the
// API's own origin, sandboxes the app (Serve).
//
// It never reaches a jail and never decides who may use a session: the
// engine checks the caller (or the token, through Shares), enters the
// session's network namespace and dials; the API hands the connection to
// Serve. It knows nothing of sessions, engines, fleets, HTTP routes or
// NATS.
package preview
