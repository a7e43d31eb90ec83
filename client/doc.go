// Package client is the Go client of a pyexec server. It speaks the HTTP API
// of python-executor, so code written against that service's Go client keeps
// working with the same method names (ExecuteSync, ExecuteAsync,
// GetExecution, KillExecution, WaitForCompletion, Eval, the Tar* helpers and
// DetectEntrypoint), and adds what pyexec serves beside that API: live
// events (Follow), the execution history (ListExecutions), rich outputs
// and the files an execution produced (ExecutionResult.Outputs, ListFiles,
// DownloadFile) and API keys (WithAPIKey).
//
// A Client holds no mutable state after New and is safe for concurrent use.
// Every non-2xx answer is returned as a *APIError carrying the status code
// and the server's own message; use errors.As to inspect it.
//
// The client never executes anything locally: archives built by the Tar*
// helpers are uploaded as they are, and the server decides what is safe.
package client
