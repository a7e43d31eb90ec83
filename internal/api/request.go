package api

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"time"

	"github.com/pyexec/pyexec/internal/egress"
	"github.com/pyexec/pyexec/internal/engine"
)

// maxCPUShares is the largest cgroup cpu.shares value the kernel accepts.
const maxCPUShares = 262144

// defaultEntrypoint runs when a request names none.
const defaultEntrypoint = "main.py"

// ExecConfig is the "config" object of exec metadata and eval requests.
// Zero or absent limits mean the server defaults.
type ExecConfig struct {
	TimeoutSeconds int `json:"timeout_seconds,omitempty" minimum:"0" doc:"Wall-clock limit in seconds; 0 means the server default"`
	// NetworkDisabled is a pointer because absent and false differ: only an
	// explicit false asks for network access.
	NetworkDisabled *bool `json:"network_disabled,omitempty" nullable:"true" doc:"Network is off unless this is explicitly false and the server allows network access"`
	MemoryMB        int   `json:"memory_mb,omitempty" minimum:"0" doc:"Memory limit in MiB; 0 means the server default"`
	DiskMB          int   `json:"disk_mb,omitempty" minimum:"0" doc:"Workspace size in MiB; 0 means the server default"`
	CPUShares       int   `json:"cpu_shares,omitempty" minimum:"0" doc:"Relative CPU weight; 0 means the server default"`
	// Network narrows the operator's allow list; it asks for network too.
	Network *NetworkConfig `json:"network,omitempty" doc:"Network for this execution, narrowed to these destinations (each must also be on the operator's list); implies network_disabled: false"`
	// Secrets names operator secrets; the engine checks the caller may use
	// each (docs/network.md).
	Secrets []string `json:"secrets,omitempty" maxItems:"32" doc:"Names of operator secrets (--secrets-file) for this execution: the code gets an environment variable of each name holding a placeholder, which the egress replaces by the value in requests to the secret's hosts; needs network. An unknown name and one this API key may not use get the same 400"`
	// Workspace names one of the caller's workspaces (docs/workspaces.md).
	Workspace     string `json:"workspace,omitempty" doc:"A workspace of yours mounted at /workspace for the run; what the run leaves there is committed as its next version, whatever the outcome"`
	WorkspaceMode string `json:"workspace_mode,omitempty" enum:"rw,ro" doc:"rw (default) or ro: the workspace mounted read-only"`
}

// NetworkConfig is the "config.network" object (docs/network.md).
type NetworkConfig struct {
	Allow []string `json:"allow" maxItems:"256" doc:"Destinations this execution may reach: names (*.pypi.org), IPs, CIDRs, each with an optional :port or :lo-hi; a destination must be on the operator's list too"`
}

// limits are the bounds the server puts on what a request may ask for.
type limits struct {
	MaxTimeout   time.Duration
	MaxMemoryMB  int
	MaxDiskMB    int
	AllowNetwork bool
	// NetworkDefault gives network to a request that says nothing about
	// it (network_disabled absent), as the operator chose.
	NetworkDefault bool
	Archive        archiveLimits
	MaxBodyBytes   int64
}

// runSpec is what exec metadata and eval requests have in common, after
// decoding and before it becomes an engine.Request.
type runSpec struct {
	Entrypoint    string
	Stdin         string
	StdinEncoding string
	Env           []string
	Args          []string
	Requirements  string
	PreCommands   []string
	PythonVersion string
	EvalLastExpr  bool
	Lint          LintMode
	Config        *ExecConfig
	Rich          richOptions
}

// request checks spec against the server's limits and builds the
// engine.Request for files, recording
// the caller from ctx for the audit trail.
func (l *limits) request(ctx context.Context, files []engine.File, spec runSpec) (engine.Request, error) {
	entry := spec.Entrypoint
	if entry == "" {
		entry = defaultEntrypoint
	}
	entry, err := cleanPath(entry, quoted("entrypoint", spec.Entrypoint))
	if err != nil {
		return engine.Request{}, err
	}
	for i, kv := range spec.Env {
		if !validEnv(kv) {
			return engine.Request{}, errorf(http.StatusBadRequest, "env_vars[%d]: %q is not KEY=value with KEY made of letters, digits and _ (not starting with a digit)", i, kv)
		}
	}
	stdin, err := decodeStdin(spec.Stdin, spec.StdinEncoding)
	if err != nil {
		return engine.Request{}, err
	}
	caller := callerFrom(ctx)
	req := engine.Request{
		Files:         files,
		Entrypoint:    entry,
		Args:          spec.Args,
		Stdin:         stdin,
		Env:           spec.Env,
		PythonVersion: spec.PythonVersion,
		Requirements:  spec.Requirements,
		PreCommands:   spec.PreCommands,
		EvalLastExpr:  spec.EvalLastExpr,
		Lint:          string(spec.Lint),
		Caller:        caller.Name,
		ClientAddr:    caller.Addr,
	}
	spec.Rich.apply(&req)
	if err := l.applyConfig(&req, spec.Config); err != nil {
		return engine.Request{}, err
	}
	return req, nil
}

// decodeStdin returns the bytes a request's stdin stands for: the text,
// or with encoding base64 the bytes it encodes.
func decodeStdin(stdin, encoding string) (engine.BinaryString, error) {
	switch encoding {
	case "", "utf-8":
		return engine.BinaryString(stdin), nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(stdin)
		if err != nil {
			return "", errorf(http.StatusBadRequest, "stdin is not valid base64 (stdin_encoding is base64): %v", err)
		}
		return engine.BinaryString(b), nil
	}
	return "", errorf(http.StatusBadRequest, "stdin_encoding must be utf-8 or base64, got %q", encoding)
}

// applyConfig copies the requested limits into req after checking them
// against the server's maxima; zero stays zero (the engine's defaults).
func (l *limits) applyConfig(req *engine.Request, c *ExecConfig) error {
	if c == nil {
		req.Network = l.NetworkDefault
		return nil
	}
	maxTimeout := int(l.MaxTimeout / time.Second)
	// flag names the server setting that raises a maximum, so that a
	// client refused (python-executor allowed `--timeout 600`) learns
	// what the operator can change.
	checks := []struct {
		field, flag string
		val, max    int
	}{
		{"config.timeout_seconds", "--max-timeout (PYEXEC_MAX_TIMEOUT)", c.TimeoutSeconds, maxTimeout},
		{"config.memory_mb", "--max-memory-mb (PYEXEC_MAX_MEMORY_MB)", c.MemoryMB, l.MaxMemoryMB},
		{"config.disk_mb", "--max-disk-mb (PYEXEC_MAX_DISK_MB)", c.DiskMB, l.MaxDiskMB},
		{"config.cpu_shares", "", c.CPUShares, maxCPUShares},
	}
	for _, ck := range checks {
		switch {
		case ck.val < 0:
			return errorf(http.StatusBadRequest, "%s must not be negative, got %d", ck.field, ck.val)
		case ck.val > ck.max && ck.flag != "":
			return errorf(http.StatusBadRequest, "%s must be at most %d on this server, got %d; the server's %s raises the maximum", ck.field, ck.max, ck.val, ck.flag)
		case ck.val > ck.max:
			return errorf(http.StatusBadRequest, "%s must be at most %d, got %d", ck.field, ck.max, ck.val)
		}
	}
	req.Timeout = time.Duration(c.TimeoutSeconds) * time.Second
	req.MemoryBytes = int64(c.MemoryMB) << 20
	req.DiskBytes = int64(c.DiskMB) << 20
	req.CPUShares = c.CPUShares
	req.Workspace, req.WorkspaceMode = c.Workspace, c.WorkspaceMode
	return l.applyNetwork(req, c)
}

// applyNetwork decides whether req gets network: an explicit
// network_disabled wins, config.network asks for it, and otherwise the
// operator's default holds.
func (l *limits) applyNetwork(req *engine.Request, c *ExecConfig) error {
	network, allow, err := l.networkOf(l.NetworkDefault, c.NetworkDisabled, c.Network, "config.network")
	if err != nil {
		return err
	}
	req.Network, req.NetworkAllow, req.Secrets = network, allow, c.Secrets
	return nil
}

// networkOf is whether a request gets network, and its allow list (nil:
// the operator's): an explicit network_disabled wins, a network object
// (field names it in refusals) asks for it, else def holds.
func (l *limits) networkOf(def bool, disabled *bool, nc *NetworkConfig, field string) (bool, []string, error) {
	network := def
	if disabled != nil {
		network = !*disabled
	}
	var allow []string
	if nc != nil {
		if disabled != nil && *disabled {
			return false, nil, errorf(http.StatusBadRequest, "%s contradicts network_disabled: true", field)
		}
		if len(nc.Allow) == 0 {
			return false, nil, errorf(http.StatusBadRequest, "%s.allow must list at least one destination", field)
		}
		for i, r := range nc.Allow {
			if _, err := egress.ParseRule(r); err != nil {
				return false, nil, errorf(http.StatusBadRequest, "%s.allow[%d]: %v", field, i, err)
			}
		}
		network, allow = true, nc.Allow
	}
	if network && !l.AllowNetwork {
		return false, nil, errorf(http.StatusBadRequest, "network access is disabled on this server")
	}
	return network, allow, nil
}

// validEnv reports whether kv is KEY=value with a portable variable name.
func validEnv(kv string) bool {
	key, value, ok := strings.Cut(kv, "=")
	if !ok || key == "" || strings.ContainsRune(value, 0) {
		return false
	}
	for i, r := range key {
		letter := r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z'
		if !letter && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return true
}
