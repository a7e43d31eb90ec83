// Package snapshot owns the file a session's snapshot is stored as: a
// header the server writes (who owns it, the session's configuration, what
// was saved and skipped), the state a session's kernel saved (runner's
// SaveRequest) and the session's workspace as a tar, all under one
// HMAC-SHA256 keyed by the server's secret and bound to the owner.
//
// A snapshot is made by the server only, streamed as it is made (Writer),
// and verified whole before any of it is used (Open): a file edited by
// hand, forged, truncated, made for another owner or under another key is
// refused before one byte of its state could reach a Python process. The
// state itself comes from the owner's own interpreter: this package never
// interprets it, and nothing here runs or loads it. Workspace archives are
// written from and into an os.Root (Tar, Untar): regular files and
// directories only, links never followed nor made.
//
// It knows nothing of sessions, engines or stores: the engine builds the
// header, feeds the state and the workspace in, and keeps the bytes
// wherever it keeps them.
package snapshot
