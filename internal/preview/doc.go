// Package preview lets a browser reach a web app that a session serves
// inside its jail, and keeps the app away from everything else the browser
// holds. It owns the words and rules of a preview: the strict reading of
// a port (ParsePort), preview URLs — shares, each bound to one session's
// port, signed with the server's key, expiring and revocable, kept in a
// small Store (Service) — the origin previews are served on (Origin), the
// limits of a preview (connections, bytes, idle time: Meter) and the
// HTTP/1.1 and WebSocket reverse proxy with the headers that keep an app
// on a shared origin in a sandbox (Serve).
//
// It never reaches a jail and never decides who may use a session: the
// caller dials the app through the engine, which checks the caller and
// enters the session's network namespace, and hands the connection over.
// It knows nothing of sessions, engines, fleets or NATS beyond the Store
// it declares.
package preview
