/** Snapshots of sessions: a session's variables and files, saved by the server and restored later. */

/** A variable a snapshot left out, or a restore could not load, and why (a thread, an open socket, a missing module). */
export interface SkippedVariable {
  name: string;
  reason: string;
}

/** The answer of Session.snapshot(). */
export interface SnapshotSaved {
  /** Pass as from_snapshot to createSession to restore it. */
  snapshot_id: string;
  /** The stored size: state, workspace files and header. */
  bytes: number;
  /** The session's cells when it was saved; a restored session counts on from it. */
  execution_count: number;
  saved: string[];
  skipped: SkippedVariable[];
}

/** A stored snapshot (listSnapshots). */
export interface SnapshotInfo {
  snapshot_id: string;
  /** The session it was made of. */
  session_id: string;
  bytes: number;
  created_at: string;
  python_version: string;
  execution_count: number;
  skipped: SkippedVariable[];
}
