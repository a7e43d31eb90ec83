package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pyexec/pyexec/client"
)

// Limits of run_python's arguments that the schema states to the model.
const (
	// entrypoint is the file the code argument becomes.
	entrypoint = "main.py"
	// maxTimeoutSeconds caps timeout_seconds in the schema; the server may
	// allow less and says so in its error.
	maxTimeoutSeconds = 3600
)

// pollInterval is how often a run is polled when its event stream broke
// off before the final status.
const pollInterval = 250 * time.Millisecond

// pythonVersion is the shape of python_version: MAJOR.MINOR.
var pythonVersion = regexp.MustCompile(`^3\.[0-9]{1,2}$`)

// RunPythonInput are the arguments of run_python.
type RunPythonInput struct {
	Code           string      `json:"code" jsonschema:"Python source code to run, as the file main.py. Print whatever you want to see: only stdout and stderr come back."`
	Files          []InputFile `json:"files,omitempty" jsonschema:"Extra files written next to main.py before it runs, such as modules it imports or data it reads."`
	PythonVersion  string      `json:"python_version,omitempty" jsonschema:"Python version to use, as MAJOR.MINOR (e.g. 3.12). Default: the server's default version."`
	TimeoutSeconds int         `json:"timeout_seconds,omitempty" jsonschema:"Wall-clock limit in seconds; the run is killed when it expires. Default: the server's default."`
	Network        bool        `json:"network,omitempty" jsonschema:"Give the code network access. Off by default; refused unless the server's operator allows network access."`
	NetworkAllow   []string    `json:"network_allow,omitempty" jsonschema:"Limit network access to these destinations (e.g. [\"pypi.org:443\", \"*.github.com\"]); each must also be allowed by the server's operator. Implies network."`
	Secrets        []string    `json:"secrets,omitempty" jsonschema:"Names of credentials the server's operator defined (e.g. [\"GITHUB_TOKEN\"]): the code finds an environment variable of each name holding a placeholder, and the server puts the real value in its place when the code sends it, as the operator's header, to that credential's hosts. The code never sees the value. An unknown name is refused. Implies network."`
	Stdin          string      `json:"stdin,omitempty" jsonschema:"Text given to the program on standard input."`
	Requirements   []string    `json:"requirements,omitempty" jsonschema:"Packages to install before the code runs, as pip requirement specifiers, e.g. [\"pandas\", \"requests==2.32.3\"]. Imports of well-known packages are usually detected and installed without this; list them to pin versions or when detection misses one. Not with session_id."`
	SessionID      string      `json:"session_id,omitempty" jsonschema:"Run the code in this session (from create_session): variables, imports and files of earlier calls are still there, and the value of a final expression is returned."`
	Workspace      string      `json:"workspace,omitempty" jsonschema:"A workspace of yours (list_workspaces) mounted at /workspace for the run: files earlier runs left there are readable, and what this run writes there is kept, whatever its outcome. Not with session_id (give it to create_session)."`
	WorkspaceRO    bool        `json:"workspace_read_only,omitempty" jsonschema:"Mount the workspace read-only: writes below /workspace fail."`
}

// InputFile is one extra file of a run_python call.
type InputFile struct {
	Path    string `json:"path" jsonschema:"Relative path in the working directory, e.g. helpers.py or data/input.csv."`
	Content string `json:"content" jsonschema:"The file's text."`
}

// RunPythonOutput is the structured result of run_python: the execution's
// record, as the API reports it.
type RunPythonOutput struct {
	ExecutionID     string `json:"execution_id" jsonschema:"ID of the execution in pyexec's API."`
	Status          string `json:"status" jsonschema:"completed (the program ran to its end, whatever its exit code), failed (timeout, limit or service failure) or killed."`
	ExitCode        int    `json:"exit_code" jsonschema:"Exit status of the program; non-zero after an uncaught exception."`
	Stdout          string `json:"stdout,omitempty"`
	Stderr          string `json:"stderr,omitempty"`
	Error           string `json:"error,omitempty" jsonschema:"Why a failed execution failed."`
	ErrorType       string `json:"error_type,omitempty" jsonschema:"Class of the uncaught exception, e.g. NameError."`
	ErrorLine       int    `json:"error_line,omitempty" jsonschema:"Line of the code where the uncaught exception was raised."`
	Reason          string `json:"reason,omitempty" jsonschema:"Why the execution ended as it did, e.g. timeout or oom."`
	DurationMs      int64  `json:"duration_ms,omitempty"`
	PythonVersion   string `json:"python_version,omitempty" jsonschema:"Interpreter that ran the code."`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`

	Results          any                      `json:"results,omitempty" jsonschema:"The JSON of a top-level dict named results, if the code defined one."`
	Outputs          []OutputSummary          `json:"outputs,omitempty" jsonschema:"Rich outputs in order: display() calls and matplotlib figures (shown as image content)."`
	OutputsTruncated bool                     `json:"outputs_truncated,omitempty"`
	Files            []FileEntry              `json:"files,omitempty" jsonschema:"Files the code wrote or changed; read one with read_file."`
	FilesOmitted     int                      `json:"files_omitted,omitempty"`
	SessionID        string                   `json:"session_id,omitempty" jsonschema:"The session the code ran in."`
	ExecutionCount   int                      `json:"execution_count,omitempty" jsonschema:"The cell's number in its session."`
	Workspace        *client.WorkspaceOutcome `json:"workspace,omitempty" jsonschema:"What became of the workspace: the version the run's changes made, conflicts with other writers."`
	Result           string                   `json:"result,omitempty" jsonschema:"repr of the final expression of a session's cell."`
}

// runPythonTool is run_python's definition.
func runPythonTool() *mcp.Tool {
	in := schemaFor[RunPythonInput]()
	in.Properties["timeout_seconds"].Minimum = ptr(1.0)
	in.Properties["timeout_seconds"].Maximum = ptr(float64(maxTimeoutSeconds))
	in.Properties["python_version"].Pattern = pythonVersion.String()
	// A nil slice is never sent; models read a plain array best.
	for _, p := range []string{"files", "requirements"} {
		in.Properties[p].Types, in.Properties[p].Type = nil, "array"
	}
	return &mcp.Tool{
		Name:  "run_python",
		Title: "Run Python",
		Description: "Run Python code in an isolated sandbox and return its stdout, stderr and exit status. " +
			"The code runs as main.py in a fresh, empty working directory as an unprivileged user, with limits on " +
			"time and memory; nothing is kept between calls, so include every import and definition each time. " +
			"Packages named in requirements are installed first (common imports are detected). matplotlib figures " +
			"come back as images you can see, display(obj) calls and a top-level dict named results as structured " +
			"data, and files the code writes are listed: read them with read_file. A Python exception is reported " +
			"as an error result with its traceback, so you can fix the code and try again.",
		InputSchema:  in,
		OutputSchema: schemaFor[RunPythonOutput](),
		Annotations: &mcp.ToolAnnotations{
			Title:           "Run Python",
			ReadOnlyHint:    false,
			DestructiveHint: ptr(false),
			IdempotentHint:  false,
			OpenWorldHint:   ptr(true),
		},
	}
}

// request turns the arguments into the tar and metadata of an execution.
func (in *RunPythonInput) request() ([]byte, *client.Metadata, error) {
	if in.PythonVersion != "" && !pythonVersion.MatchString(in.PythonVersion) {
		return nil, nil, fmt.Errorf("python_version %q is not MAJOR.MINOR, e.g. 3.12", in.PythonVersion)
	}
	if in.TimeoutSeconds < 0 {
		return nil, nil, fmt.Errorf("timeout_seconds must be positive, got %d", in.TimeoutSeconds)
	}
	reqs, err := requirementsTxt(in.Requirements)
	if err != nil {
		return nil, nil, err
	}
	mode, err := workspaceMode(in.Workspace, in.WorkspaceRO)
	if err != nil {
		return nil, nil, err
	}
	files := map[string]string{entrypoint: in.Code}
	for i, f := range in.Files {
		if _, dup := files[f.Path]; dup {
			return nil, nil, fmt.Errorf("files[%d]: %q is given twice (the code argument is %s)", i, f.Path, entrypoint)
		}
		files[f.Path] = f.Content
	}
	tarData, err := client.TarFromMap(files)
	if err != nil {
		return nil, nil, fmt.Errorf("files: %w", err)
	}
	m := &client.Metadata{
		Entrypoint:      entrypoint,
		Stdin:           in.Stdin,
		RequirementsTxt: reqs,
		Config: &client.ExecutionConfig{
			TimeoutSeconds:  in.TimeoutSeconds,
			NetworkDisabled: client.Bool(!in.Network && len(in.NetworkAllow) == 0 && len(in.Secrets) == 0),
			Secrets:         in.Secrets,
			Workspace:       in.Workspace,
			WorkspaceMode:   mode,
		},
	}
	if len(in.NetworkAllow) > 0 {
		m.Config.Network = &client.NetworkConfig{Allow: in.NetworkAllow}
	}
	if in.PythonVersion != "" {
		m.DockerImage = "python:" + in.PythonVersion
	}
	return tarData, m, nil
}

// runPython runs the code and waits for its end, reporting its output as
// progress when the client asked for progress. A run that the client
// cancels is killed. A program that fails (exception, timeout, kill) is a
// tool result with IsError set; only a call that could not run at all is
// a Go error, which the SDK also turns into an IsError result.
func (h *handlers) runPython(ctx context.Context, req *mcp.CallToolRequest, in RunPythonInput) (*mcp.CallToolResult, RunPythonOutput, error) {
	if in.SessionID != "" {
		return h.runCell(ctx, in)
	}
	tarData, meta, err := in.request()
	if err != nil {
		return nil, RunPythonOutput{}, err
	}
	ctx, cancel := h.bound(ctx)
	defer cancel()
	id, err := h.backend.ExecuteAsync(ctx, tarData, meta)
	if err != nil {
		return nil, RunPythonOutput{}, fmt.Errorf("starting the run: %w", err)
	}
	res, err := h.await(ctx, id, newProgress(req, h.log))
	if err != nil {
		if ctx.Err() != nil {
			return nil, RunPythonOutput{}, h.kill(ctx, id)
		}
		return nil, RunPythonOutput{}, err
	}
	rc := newRich(res)
	out := newRunPythonOutput(res)
	out.Outputs = rc.outputs
	return &mcp.CallToolResult{
		Content: append([]mcp.Content{&mcp.TextContent{Text: renderResult(res) + workspaceLine(res.Workspace) + rc.text}}, rc.images...),
		IsError: failed(res),
	}, out, nil
}

// requirementsTxt joins requirement specifiers into a requirements.txt,
// refusing what is not one: an empty entry, a line break (a second line),
// or an option such as --index-url.
func requirementsTxt(reqs []string) (string, error) {
	for i, r := range reqs {
		r = strings.TrimSpace(r)
		switch {
		case r == "":
			return "", fmt.Errorf("requirements[%d] is empty", i)
		case strings.ContainsAny(r, "\r\n"):
			return "", fmt.Errorf("requirements[%d]: %q holds a line break; give one package per entry", i, r)
		case strings.HasPrefix(r, "-"):
			return "", fmt.Errorf("requirements[%d]: %q is an option, not a package", i, r)
		}
		reqs[i] = r
	}
	if len(reqs) == 0 {
		return "", nil
	}
	return strings.Join(reqs, "\n") + "\n", nil
}

// await follows the execution's events, passing output on as progress,
// until its final status, and returns its final record.
func (h *handlers) await(ctx context.Context, id string, p *progress) (*client.ExecutionResult, error) {
	for ev, err := range h.backend.Follow(ctx, id) {
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// Progress is a courtesy; the outcome is in the record.
			h.log.Warn("run_python: event stream broke off; polling", "execution_id", id, "err", err)
			break
		}
		p.event(ctx, ev)
	}
	for {
		res, err := h.backend.GetExecution(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("reading the result of %s: %w", id, err)
		}
		if res.Status.Final() {
			return res, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// kill stops the run of a canceled call. It returns the error the call
// ends with: the cancellation, and the kill's failure if any.
func (h *handlers) kill(ctx context.Context, id string) error {
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
	defer cancel()
	canceled := fmt.Errorf("run %s was canceled and killed: %w", id, context.Cause(ctx))
	if _, err := h.backend.Kill(kctx, id); err != nil {
		h.log.Error("run_python: killing a canceled run", "execution_id", id, "err", err)
		return errors.Join(canceled, fmt.Errorf("killing %s: %w", id, err))
	}
	return canceled
}

// failed reports whether a finished execution should be shown to the model
// as an error: anything but a program that ran to its end with status 0.
func failed(r *client.ExecutionResult) bool {
	return r.Status != client.StatusCompleted || r.ExitCode != 0
}

func newRunPythonOutput(r *client.ExecutionResult) RunPythonOutput {
	return RunPythonOutput{
		ExecutionID:     r.ExecutionID,
		Status:          string(r.Status),
		ExitCode:        r.ExitCode,
		Stdout:          r.Stdout,
		Stderr:          r.Stderr,
		Error:           r.Error,
		ErrorType:       r.ErrorType,
		ErrorLine:       r.ErrorLine,
		Reason:          r.Reason,
		DurationMs:      r.DurationMs,
		PythonVersion:   r.PythonVersion,
		StdoutTruncated: r.StdoutTruncated,
		StderrTruncated: r.StderrTruncated,

		Results:          results(r.Results),
		OutputsTruncated: r.OutputsTruncated,
		Files:            newFileEntries(r.Files),
		FilesOmitted:     r.FilesOmitted,
		Workspace:        r.Workspace,
	}
}
