/**
 * Wire types of the pyexec API. Field names are the API's own (snake_case),
 * as in the JSON the server sends and the docs describe.
 */

import type { SkippedVariable } from "./snapshots.js";

/** pending → running → completed | failed | killed. */
export type ExecutionStatus = "pending" | "running" | "completed" | "failed" | "killed";

/** Whether a status is final (completed, failed or killed). */
export function isFinal(status: string): boolean {
  return status === "completed" || status === "failed" || status === "killed";
}

/** Why an execution ended as it did (ExecutionResult.reason). */
export type Reason = "timeout" | "oom" | "output_limit" | "killed" | "install_error" | "setup_error" | "node_lost";

/** Resource limits; 0 or absent means the server's default. */
export interface ExecConfig {
  timeout_seconds?: number;
  memory_mb?: number;
  disk_mb?: number;
  cpu_shares?: number;
  /** Explicit false asks for network access (granted only when the server allows it). */
  network_disabled?: boolean;
  /** Network narrowed to these destinations (`pypi.org:443`, `*.github.com`), each also on the operator's list. */
  network?: { allow: string[] };
  /** Names of operator secrets (pyexec's --secrets-file); they need network. */
  secrets?: string[];
  /** A workspace of the key mounted at /workspace; what the run leaves there is its next version. */
  workspace?: string;
  /** "rw" (the default) or "ro": mounted read-only. */
  workspace_mode?: "rw" | "ro";
}

/** One file of an eval request: text, or base64 with encoding "base64". */
export interface CodeFile {
  name: string;
  content: string;
  encoding?: "utf-8" | "base64";
}

/** Rich-output and artifact options shared by eval and run. */
export interface RichOptions {
  /** Variables loaded with pandas before the code runs: name → uploaded file. */
  dataframes?: Record<string, string>;
  /** Glob patterns of the files to return as artifacts (default: all written). */
  collect?: string[];
  figure_format?: "png" | "svg";
  /** DataFrame rows kept in outputs. */
  max_rows?: number;
}

/** Options every way of running code shares. */
export interface RunCommon extends RichOptions {
  stdin?: string;
  /** Text of a requirements.txt to install first; "-" turns off import detection. */
  requirements?: string;
  /** ruff's diagnostics with the run (true) or instead of it ("only"). */
  lint?: boolean | "only";
  /** Limits, merged into config. */
  timeout_seconds?: number;
  memory_mb?: number;
  disk_mb?: number;
  cpu_shares?: number;
  /**
   * Ask for network access (the server must allow it); default off. A list
   * asks for network narrowed to those destinations (`pypi.org:443`,
   * `*.github.com`), each of which the operator's list must also allow.
   */
  network?: boolean | string[];
  /**
   * Operator secrets by name (pyexec's --secrets-file): the code finds an
   * environment variable of each name holding a placeholder, which the
   * server's egress replaces by the value in requests to the secret's hosts.
   * They ask for network unless `network` is false; an unknown name, or one
   * this API key may not use, is a 400.
   */
  secrets?: string[];
  /** A workspace of yours mounted at /workspace (docs/workspaces.md), merged into config. */
  workspace?: string;
  /** "ro" mounts the workspace read-only. */
  workspace_mode?: "rw" | "ro";
  config?: ExecConfig;
}

/** POST /api/v1/eval. */
export interface EvalRequest extends RunCommon {
  /** Run as main.py; ignored when files is set. */
  code?: string;
  /** Files: an array of CodeFile, or a map path → text or bytes. */
  files?: CodeFile[] | Record<string, string | Uint8Array>;
  entrypoint?: string;
  /** e.g. "3.12"; the server's default when absent. */
  python_version?: string;
  /** Return the repr of a final expression in result. */
  eval_last_expr?: boolean;
}

/** A project for run and submit: Python source (main.py), files, or an uncompressed tar. */
export type Project = string | Record<string, string | Uint8Array> | Uint8Array | ArrayBuffer;

/** Options of run and submit (multipart /api/v1/exec/*). */
export interface RunOptions extends RunCommon {
  /** The file to run; detected (main.py › __main__.py › first .py) when absent. */
  entrypoint?: string;
  /** e.g. "3.12", sent as python-executor's docker_image "python:3.12". */
  python_version?: string;
  /** Arguments of the script (sys.argv[1:]). */
  args?: string[];
  /** Environment variables. */
  env?: Record<string, string>;
  /** Shell commands run in the jail before the script. */
  pre_commands?: string[];
}

/** A file an execution produced. */
export interface FileInfo {
  path: string;
  size: number;
  sha256: string;
  mime: string;
  /** Base64 of a small image, inlined. */
  content?: string;
}

/** A position in a file, 1-based. */
export interface Position {
  line: number;
  column: number;
}

/** One problem ruff found. */
export interface Diagnostic {
  code: string;
  message: string;
  location: Position;
  end_location: Position;
  fix: unknown;
  filename?: string;
}

/** POST /api/v1/lint. */
export interface LintRequest {
  code?: string;
  files?: CodeFile[] | Record<string, string>;
  /** "default" (likely bugs only) or "strict" (nearly every ruff rule); select/ignore replace its rules. */
  profile?: "default" | "strict";
  select?: string[];
  ignore?: string[];
}

/** A Jupyter-style MIME bundle on the wire. */
export interface OutputData {
  type: "display" | "result" | string;
  data: Record<string, unknown>;
  metadata?: unknown;
}

/** An ExecutionResult as the server sends it. */
export interface ExecutionResultData {
  execution_id: string;
  status: ExecutionStatus;
  exit_code: number;
  stdout?: string;
  stderr?: string;
  error?: string;
  error_type?: string;
  error_line?: number;
  started_at?: string;
  finished_at?: string;
  created_at?: string;
  duration_ms?: number;
  result?: string;
  reason?: Reason | string;
  timed_out?: boolean;
  cpu_time_ms?: number;
  peak_memory_bytes?: number;
  stdout_truncated?: boolean;
  stderr_truncated?: boolean;
  python_version?: string;
  warnings?: string[];
  lint?: Diagnostic[];
  outputs?: OutputData[];
  outputs_truncated?: boolean;
  results?: unknown;
  files?: FileInfo[];
  files_omitted?: number;
  workspace?: WorkspaceOutcome;
}

/** One page of listExecutions, most recent first. */
export interface ExecutionList<R> {
  executions: R[];
  next_cursor?: string;
}

/** The kinds of live events. */
export type EventType = "status" | "stdout" | "stderr" | "install" | "display";

/** One live event of an execution; seq starts at 1 and has no gaps. */
export interface ExecutionEvent {
  seq: number;
  type: EventType | string;
  /** Output text, the new status, an installer line, or for display the JSON of an output. */
  data: string;
  time: string;
}

/** GET /health. */
export interface Health {
  status: string;
  [key: string]: unknown;
}

/** POST /api/v1/sessions. */
export interface SessionOptions {
  python_version?: string;
  requirements?: string;
  env_vars?: Record<string, string>;
  memory_mb?: number;
  disk_mb?: number;
  cpu_shares?: number;
  /**
   * Ask for network access (the server must allow it): the session gets an
   * egress of its own for its whole life, with the rules of an execution's.
   */
  network?: boolean;
  /** Network limited to these destinations, within the operator's list; asks for network. */
  network_allow?: string[];
  /**
   * Operator secrets by name, as for an execution: the session's code finds
   * a placeholder in each variable (a new one after a restart, a resume or
   * a fork). They ask for network unless `network` is false.
   */
  secrets?: string[];
  idle_timeout_seconds?: number;
  max_lifetime_seconds?: number;
  figure_format?: "png" | "svg";
  max_rows?: number;
  /** A workspace of yours mounted at /workspace for the session's life; its changes are kept when it ends. */
  workspace?: string;
  workspace_mode?: "rw" | "ro";
  /** Restore this snapshot of yours (Session.snapshot()): its variables and files, and its configuration for what is left out. */
  from_snapshot?: string;
}

/** A live session. */
export interface SessionInfo {
  session_id: string;
  /** hibernated: saved without an interpreter after the server's hibernation delay; the next call resumes it. */
  state: "idle" | "busy" | "hibernated" | string;
  python_version: string;
  network: boolean;
  execution_count: number;
  created_at: string;
  last_activity: string;
  expires_at: string;
  idle_timeout_seconds: number;
  memory_bytes: number;
  memory_limit_bytes: number;
  disk_limit_bytes: number;
  restarts: number;
  /** The snapshot the session was restored from. */
  from_snapshot?: string;
  /** The session this one was forked from. */
  forked_from?: string;
  /** On the answer of a restore or a fork: the variables it could not load. */
  skipped?: SkippedVariable[];
}

/** A file of a session's workspace. */
export interface SessionFile {
  path: string;
  size: number;
  modified: string;
}

/** The formats of GET /api/v1/tools. */
export type ToolFormat = "openai" | "openai-responses" | "anthropic";

/** GET /api/v1/tools. */
export interface ToolList {
  format: ToolFormat;
  strict: boolean;
  tools: Record<string, unknown>[];
}

/** A workspace: a named file tree of an API key that outlives runs (docs/workspaces.md). */
export interface Workspace {
  owner: string;
  name: string;
  quota_bytes: number;
  /** The current version; each change set makes the next. */
  version: number;
  bytes: number;
  files: number;
  created: string;
  updated: string;
}

/** One entry of a workspace. */
export interface WorkspaceFile {
  path: string;
  type: "file" | "dir" | "symlink";
  size: number;
  mode: number;
  mtime?: string;
  sha256?: string;
  /** Where a symbolic link points. */
  target?: string;
}

/** One kept version of a workspace. */
export interface WorkspaceVersion {
  number: number;
  parent: number;
  bytes: number;
  files: number;
  created: string;
  /** What made it: "create", "run <id>", "upload", "write", "delete", "restore of version N". */
  source: string;
}

/** What a change to a workspace made. */
export interface WorkspaceCommit {
  /** The version after the change: a new one when changed. */
  version: number;
  base: number;
  changed: boolean;
  added: number;
  modified: number;
  deleted: number;
  /** Paths another writer changed meanwhile; this writer's content is kept as kept_as. */
  conflicts?: { path: string; kept_as?: string; reason: string }[];
  /** Paths that were not kept, and why. */
  refused?: { path: string; reason: string }[];
}

/** What became of a run's workspace; error when its changes were not kept. */
export interface WorkspaceOutcome extends WorkspaceCommit {
  name: string;
  mode: "rw" | "ro";
  error?: string;
}
