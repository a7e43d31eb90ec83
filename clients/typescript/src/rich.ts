/** Rich results: outputs as typed objects, images as bytes and data URLs, DataFrames as records. */

import { dataURL, decodeBase64 } from "./base64.js";
import type { Diagnostic, ExecutionResultData, ExecutionStatus, FileInfo, OutputData, WorkspaceOutcome } from "./types.js";

/** An image of an output or a file, decoded. */
export interface Image {
  /** e.g. "image/png". */
  mimeType: string;
  /** The image's bytes (for SVG, its UTF-8 text). */
  bytes: Uint8Array;
  /** A data: URL for <img src> or a model's image input. */
  dataUrl: string;
}

/** A pandas DataFrame or Series as the server sends it (application/json). */
export interface DataFrame {
  columns: string[];
  records: Record<string, unknown>[];
  /** Rows of the whole frame; records may hold fewer (max_rows). */
  total_rows: number;
  truncated: boolean;
}

/** Base64-encoded image types of a MIME bundle, best first; SVG is text. */
const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"] as const;

/** One rich output: a display() call, a matplotlib figure, or the last expression. */
export class Output {
  /** "display" or "result". */
  readonly type: string;
  /** MIME type → content, as sent: strings, base64 for PNG/JPEG, JSON for application/json. */
  readonly data: Record<string, unknown>;
  readonly metadata: unknown;

  constructor(raw: OutputData) {
    this.type = raw.type;
    this.data = raw.data ?? {};
    this.metadata = raw.metadata;
  }

  /** The MIME types of the bundle. */
  get mimeTypes(): string[] {
    return Object.keys(this.data);
  }

  /** The string content of a MIME type, or undefined. */
  text(mimeType: string): string | undefined {
    const v = this.data[mimeType];
    return typeof v === "string" ? v : undefined;
  }

  /** text/plain. */
  get plain(): string | undefined {
    return this.text("text/plain");
  }

  /** text/html. */
  get html(): string | undefined {
    return this.text("text/html");
  }

  /** application/json, parsed. */
  get json(): unknown {
    return this.data["application/json"];
  }

  /** The best image of the bundle (PNG, JPEG, GIF, WebP, then SVG), decoded; undefined when none. */
  image(): Image | undefined {
    for (const mimeType of IMAGE_TYPES) {
      const s = this.text(mimeType);
      if (s !== undefined) {
        const bytes = decodeBase64(s);
        return { mimeType, bytes, dataUrl: dataURL(mimeType, bytes) };
      }
    }
    const svg = this.text("image/svg+xml");
    if (svg !== undefined) {
      const bytes = new TextEncoder().encode(svg);
      return { mimeType: "image/svg+xml", bytes, dataUrl: dataURL("image/svg+xml", bytes) };
    }
    return undefined;
  }

  /** The DataFrame of the bundle (its application/json with columns and records), or undefined. */
  dataFrame(): DataFrame | undefined {
    const j = this.json;
    if (j === null || typeof j !== "object") return undefined;
    const o = j as Record<string, unknown>;
    if (!Array.isArray(o["columns"]) || !Array.isArray(o["records"])) return undefined;
    return {
      columns: o["columns"] as string[],
      records: o["records"] as Record<string, unknown>[],
      total_rows: typeof o["total_rows"] === "number" ? o["total_rows"] : (o["records"] as unknown[]).length,
      truncated: o["truncated"] === true,
    };
  }
}

/**
 * The outcome of an execution: every field of the wire's ExecutionResult,
 * with outputs as Output objects and helpers for images and DataFrames.
 * A Python exception is a result (exit_code ≠ 0), not a thrown error.
 */
export class ExecutionResult {
  readonly execution_id: string;
  readonly status: ExecutionStatus;
  readonly exit_code: number;
  readonly stdout: string;
  readonly stderr: string;
  readonly error?: string;
  readonly error_type?: string;
  readonly error_line?: number;
  readonly started_at?: string;
  readonly finished_at?: string;
  readonly created_at?: string;
  readonly duration_ms?: number;
  /** The repr of the last expression (eval_last_expr), undefined when there was none. */
  readonly result?: string;
  readonly reason?: string;
  readonly timed_out: boolean;
  readonly cpu_time_ms?: number;
  readonly peak_memory_bytes?: number;
  readonly stdout_truncated: boolean;
  readonly stderr_truncated: boolean;
  readonly python_version?: string;
  readonly warnings: string[];
  readonly lint?: Diagnostic[];
  readonly outputs: Output[];
  readonly outputs_truncated: boolean;
  /** The JSON of the script's top-level results dict. */
  readonly results?: unknown;
  readonly files: FileInfo[];
  readonly files_omitted: number;
  /** What became of the run's workspace (the workspace option). */
  readonly workspace?: WorkspaceOutcome;
  /** The JSON as the server sent it. */
  readonly raw: ExecutionResultData;

  constructor(raw: ExecutionResultData) {
    this.raw = raw;
    this.execution_id = raw.execution_id;
    this.status = raw.status;
    this.exit_code = raw.exit_code ?? 0;
    this.stdout = raw.stdout ?? "";
    this.stderr = raw.stderr ?? "";
    this.error = raw.error;
    this.error_type = raw.error_type;
    this.error_line = raw.error_line;
    this.started_at = raw.started_at;
    this.finished_at = raw.finished_at;
    this.created_at = raw.created_at;
    this.duration_ms = raw.duration_ms;
    this.result = raw.result;
    this.reason = raw.reason;
    this.timed_out = raw.timed_out ?? false;
    this.cpu_time_ms = raw.cpu_time_ms;
    this.peak_memory_bytes = raw.peak_memory_bytes;
    this.stdout_truncated = raw.stdout_truncated ?? false;
    this.stderr_truncated = raw.stderr_truncated ?? false;
    this.python_version = raw.python_version;
    this.warnings = raw.warnings ?? [];
    this.lint = raw.lint;
    this.outputs = (raw.outputs ?? []).map((o) => new Output(o));
    this.outputs_truncated = raw.outputs_truncated ?? false;
    this.results = raw.results;
    this.files = raw.files ?? [];
    this.files_omitted = raw.files_omitted ?? 0;
    this.workspace = raw.workspace;
  }

  /** Completed with exit code 0. */
  get ok(): boolean {
    return this.status === "completed" && this.exit_code === 0;
  }

  /** Every image of the outputs, in order. */
  get images(): Image[] {
    return this.outputs.map((o) => o.image()).filter((i): i is Image => i !== undefined);
  }

  /** Every DataFrame of the outputs, in order. */
  get dataFrames(): DataFrame[] {
    return this.outputs.map((o) => o.dataFrame()).filter((d): d is DataFrame => d !== undefined);
  }

  /** The JSON of the wire form (what toJSON gives JSON.stringify). */
  toJSON(): ExecutionResultData {
    return this.raw;
  }
}

/** A session cell's result: an ExecutionResult plus the session's counters. */
export class CellResult extends ExecutionResult {
  readonly session_id: string;
  readonly execution_count: number;
  /** The session did not survive the cell. */
  readonly session_ended: boolean;
  /** The session was hibernated and resumed for this cell (threads and open files did not survive). */
  readonly resumed: boolean;
  /** On the first cell of a session whose node was lost: the checkpoint it resumed from, and the cells lost since. */
  readonly restored_from?: RestoredFrom;

  constructor(
    raw: ExecutionResultData & {
      session_id: string;
      execution_count: number;
      session_ended?: boolean;
      resumed?: boolean;
      restored_from?: RestoredFrom;
    },
  ) {
    super(raw);
    this.session_id = raw.session_id;
    this.execution_count = raw.execution_count;
    this.session_ended = raw.session_ended ?? false;
    this.resumed = raw.resumed ?? false;
    if (raw.restored_from) this.restored_from = raw.restored_from;
  }
}

/** The checkpoint a session resumed from after its node was lost. */
export interface RestoredFrom {
  readonly snapshot_id: string;
  /** Cells run after the checkpoint, whose effects are gone (may undercount). */
  readonly cells_lost: number;
  /** The execution count at the checkpoint: every cell numbered above it before this one is lost. */
  readonly checkpoint_execution_count: number;
}

/** Decodes the output of a display event (its data is an output's JSON). */
export function eventOutput(ev: { type: string; data: string }): Output | undefined {
  if (ev.type !== "display") return undefined;
  return new Output(JSON.parse(ev.data) as OutputData);
}
