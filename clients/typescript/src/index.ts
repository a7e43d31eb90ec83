/**
 * pyexec-client: a TypeScript client of pyexec, the sandboxed Python
 * execution service. Zero runtime dependencies: fetch only, so the same
 * code runs in Node ≥ 18 and in browsers. Tool helpers for model APIs are
 * the subpath exports pyexec-client/ai, pyexec-client/openai and
 * pyexec-client/anthropic.
 */

export { PyExec, codeFiles } from "./client.js";
export type { FollowOptions, ListWorkspacesOptions, WorkspaceFilesOptions, WorkspaceReadOptions } from "./client.js";
export type { CallOptions, ClientOptions } from "./transport.js";
export { Session } from "./session.js";
export type { CellOptions } from "./session.js";
export type { SkippedVariable, SnapshotInfo, SnapshotSaved } from "./snapshots.js";
export type { PortShare } from "./previews.js";
export { CellResult, ExecutionResult, Output, eventOutput } from "./rich.js";
export type { RestoredFrom } from "./rich.js";
export type { DataFrame, Image } from "./rich.js";
export {
  APIError,
  AuthenticationError,
  BadRequestError,
  ConflictError,
  ConnectionError,
  InternalServerError,
  NotFoundError,
  PayloadTooLargeError,
  PyExecError,
  RateLimitError,
  StreamEndedError,
  TimeoutError,
} from "./errors.js";
export { parseSSE } from "./sse.js";
export type { SSEMessage } from "./sse.js";
export { detectEntrypoint, tarFromFiles } from "./tar.js";
export { dataURL, decodeBase64, encodeBase64 } from "./base64.js";
export { isFinal } from "./types.js";
export type * from "./types.js";
export { renderResult, runPython } from "./tools/run.js";
export type { RunPythonArgs, ToolImage, ToolOutcome } from "./tools/run.js";
