package main

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/pyexec/pyexec/client"
)

// defaultServer is the server the client commands talk to when neither
// --server nor $PYEXEC_SERVER names one.
const defaultServer = "http://localhost:8080"

// Flag names of the python-executor global flags.
const (
	flagServer  = "server"
	flagAPIKey  = "api-key"
	flagTimeout = "timeout"
	flagMemory  = "memory"
	flagDisk    = "disk"
	flagCPU     = "cpu"
	flagNetwork = "network"
	// flagNetworkAllow narrows the operator's list (implies --network).
	flagNetworkAllow = "network-allow"
	// flagSecret names an operator secret (repeatable; implies --network).
	flagSecret  = "secret"
	flagImage   = "image"
	flagAsync   = "async"
	flagQuiet   = "quiet"
	flagVerbose = "verbose"
	flagJSON    = "json"
	// flagWorkspace and flagWorkspaceMode are flags of the commands that
	// run code (addWorkspaceFlags), not global ones.
	flagWorkspace     = "workspace"
	flagWorkspaceMode = "workspace-mode"
)

// clientOptions are the global flags of the client commands, read once per
// invocation. They are read by name, so they work whether a command defines
// them itself or inherits them as persistent flags of a parent.
type clientOptions struct {
	server  string
	apiKey  string
	timeout int // seconds; 0 = server default
	memory  int // MiB
	disk    int // MiB
	cpu     int // shares
	network bool
	allow   []string // --network-allow
	secrets []string // --secret
	image   string
	async   bool
	quiet   bool
	verbose bool
	json    bool
	// workspace and workspaceMode: --workspace, --workspace-mode.
	workspace     string
	workspaceMode string
}

// addClientFlags defines the python-executor global flags on fs.
func addClientFlags(fs *pflag.FlagSet) {
	fs.String(flagServer, "", "server URL (default $PYEXEC_SERVER, else "+defaultServer+")")
	fs.String(flagAPIKey, "", "API key, sent as a bearer token (default $PYEXEC_API_KEY)")
	fs.Int(flagTimeout, 0, "execution timeout in seconds (0 = server default)")
	fs.Int(flagMemory, 0, "memory limit in MB (0 = server default)")
	fs.Int(flagDisk, 0, "disk limit in MB (0 = server default)")
	fs.Int(flagCPU, 0, "CPU shares (0 = server default)")
	fs.Bool(flagNetwork, false, "ask for network access (the server must allow it)")
	fs.StringSlice(flagNetworkAllow, nil, "network limited to these destinations, within the server's list (names, *.wildcards, IPs, CIDRs, :port); implies --network")
	fs.StringArray(flagSecret, nil, "an operator secret for the code, by name (repeatable): the code sees a placeholder in $NAME that the server's egress replaces by the value for the secret's hosts; implies --network")
	fs.String(flagImage, "", `interpreter as a python-executor image name, e.g. "python:3.12-slim"`)
	fs.Bool(flagAsync, false, "submit asynchronously and print the execution ID")
	fs.BoolP(flagQuiet, "q", false, "quiet: print only the program's stdout")
	fs.BoolP(flagVerbose, "v", false, "verbose: print execution ID, status and duration on stderr first")
	fs.Bool(flagJSON, false, "print the raw result as JSON")
	fs.Bool(flagLocal, false, "run through a private in-process engine instead of a server (needs the rights to build jails)")
}

// newClientCmd returns a command carrying the client flags, whose body is f.
func newClientCmd(use, short string, args cobra.PositionalArgs, f runFunc) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: args, RunE: wrap(withLocal(explainErrors(f))), Annotations: map[string]string{annClient: ""}}
}

// readClientOptions reads the client flags of cmd, with the environment
// filling in --server and --api-key when they are not given.
func readClientOptions(cmd *cobra.Command) (clientOptions, error) {
	fs := cmd.Flags()
	var (
		o    clientOptions
		errs []error
	)
	str := func(name string, dst *string) {
		v, err := fs.GetString(name)
		errs = append(errs, err)
		*dst = v
	}
	num := func(name string, dst *int) {
		v, err := fs.GetInt(name)
		errs = append(errs, err)
		if v < 0 {
			errs = append(errs, fmt.Errorf("--%s must not be negative", name))
		}
		*dst = v
	}
	flag := func(name string, dst *bool) {
		v, err := fs.GetBool(name)
		errs = append(errs, err)
		*dst = v
	}
	str(flagServer, &o.server)
	str(flagAPIKey, &o.apiKey)
	num(flagTimeout, &o.timeout)
	num(flagMemory, &o.memory)
	num(flagDisk, &o.disk)
	num(flagCPU, &o.cpu)
	flag(flagNetwork, &o.network)
	allow, err := fs.GetStringSlice(flagNetworkAllow)
	errs = append(errs, err)
	o.allow = allow
	secrets, err := fs.GetStringArray(flagSecret)
	errs = append(errs, err)
	o.secrets = secrets
	o.network = o.network || len(allow) > 0 || len(secrets) > 0
	str(flagImage, &o.image)
	flag(flagAsync, &o.async)
	flag(flagQuiet, &o.quiet)
	flag(flagVerbose, &o.verbose)
	flag(flagJSON, &o.json)
	if fs.Lookup(flagWorkspace) != nil {
		str(flagWorkspace, &o.workspace)
		str(flagWorkspaceMode, &o.workspaceMode)
		switch {
		case o.workspaceMode != "" && o.workspaceMode != "rw" && o.workspaceMode != "ro":
			errs = append(errs, fmt.Errorf("--%s is rw or ro, not %q", flagWorkspaceMode, o.workspaceMode))
		case o.workspaceMode != "" && o.workspace == "":
			errs = append(errs, fmt.Errorf("--%s needs --%s", flagWorkspaceMode, flagWorkspace))
		}
	}
	for _, err := range errs {
		if err != nil {
			return clientOptions{}, err
		}
	}
	if o.server == "" {
		o.server = os.Getenv("PYEXEC_SERVER")
	}
	if o.server == "" {
		o.server = defaultServer
	}
	server, err := serverURL(o.server)
	if err != nil {
		return clientOptions{}, err
	}
	o.server = server
	if o.apiKey == "" {
		o.apiKey = os.Getenv("PYEXEC_API_KEY")
	}
	if o.quiet {
		o.verbose = false
	}
	return o, nil
}

// serverURL checks the server's address: an http or https URL, or
// host:port, which means http://host:port.
func serverURL(given string) (string, error) {
	s := given
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--server (or PYEXEC_SERVER) %q is not a server address: give http://host:port, https://host or host:port", given)
	}
	return s, nil
}

// addWorkspaceFlags defines --workspace and --workspace-mode on cmd, a
// command whose code the workspace is mounted for (what names it).
func addWorkspaceFlags(cmd *cobra.Command, what string) {
	cmd.Flags().String(flagWorkspace, "", "a workspace of yours mounted at /workspace for "+what+"; what it leaves there is kept as the workspace's next version (see pyexec ws)")
	cmd.Flags().String(flagWorkspaceMode, "", "rw (default) or ro: mount the workspace read-only")
	_ = cmd.RegisterFlagCompletionFunc(flagWorkspace, completeWorkspaces)
}

// newClient returns a client of the chosen server. Calls are bounded by the
// server's own time limits and by the user (Ctrl-C), not by a client-side
// timeout that would cut a long execution short.
func (o clientOptions) newClient() *client.Client {
	opts := []client.Option{client.WithTimeout(0)}
	if o.apiKey != "" {
		opts = append(opts, client.WithAPIKey(o.apiKey))
	}
	return client.New(o.server, opts...)
}

// config returns the resource limits and secrets of the flags. The
// network choice is always sent explicitly: python-executor servers treat
// an absent network_disabled as "network on".
func (o clientOptions) config() *client.ExecutionConfig {
	c := &client.ExecutionConfig{
		TimeoutSeconds:  o.timeout,
		NetworkDisabled: client.Bool(!o.network),
		MemoryMB:        o.memory,
		DiskMB:          o.disk,
		CPUShares:       o.cpu,
		Secrets:         o.secrets,
		Workspace:       o.workspace,
		WorkspaceMode:   o.workspaceMode,
	}
	if len(o.allow) > 0 {
		c.Network = &client.NetworkConfig{Allow: o.allow}
	}
	return c
}
