package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/client"
)

func newWsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "ws",
		Aliases: []string{"workspace"},
		Short:   "Workspaces: named file trees of your key that outlive runs",
		Long: `A workspace is a named file tree of your API key that runs and sessions
mount at /workspace (run, eval, submit and session create take --workspace
NAME); what they leave there is kept as the workspace's next version.

A place in a workspace is written NAME:PATH, e.g. proj:data/in.csv; NAME
alone is the whole workspace. See docs/workspaces.md.`,
	}
	cmd.AddCommand(newWsCreateCmd(), newWsLsCmd(), newWsPushCmd(), newWsPullCmd(), newWsRmCmd(),
		newWsVersionsCmd(), newWsRestoreCmd())
	return cmd
}

// wsRef is NAME:PATH split; PATH is "" for the whole workspace.
type wsRef struct{ name, path string }

func parseWsRef(s string) (wsRef, error) {
	name, p, _ := strings.Cut(s, ":")
	if strings.TrimSpace(name) == "" {
		return wsRef{}, fmt.Errorf("%q names no workspace: give NAME or NAME:PATH", s)
	}
	p = strings.Trim(p, "/")
	if p == "." {
		p = ""
	}
	return wsRef{name: name, path: p}, nil
}

func (r wsRef) String() string {
	if r.path == "" {
		return r.name
	}
	return r.name + ":" + r.path
}

func newWsCreateCmd() *cobra.Command {
	var quota int
	cmd := newClientCmd("create <name>", "Create an empty workspace", idArgs("workspace name", 1, cobra.ExactArgs(1)),
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			if quota < 0 {
				return exitClientError, fmt.Errorf("--quota must not be negative")
			}
			w, err := o.newClient().CreateWorkspace(cmd.Context(), args[0], quota)
			if err != nil {
				return exitClientError, err
			}
			if o.json {
				return 0, printJSON(cmd.OutOrStdout(), w)
			}
			if !o.quiet {
				fmt.Fprintln(cmd.OutOrStdout(), w.Name)
			}
			return 0, nil
		})
	cmd.Flags().IntVar(&quota, "quota", 0, "most the workspace may hold, in MiB (default: the server's)")
	return cmd
}

func newWsLsCmd() *cobra.Command {
	var version int64
	cmd := newClientCmd("ls [NAME[:DIR]]", "List your workspaces, or the files of one", cobra.MaximumNArgs(1),
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			c := o.newClient()
			if len(args) == 0 {
				return listWorkspaces(cmd.Context(), c, o, cmd.OutOrStdout())
			}
			ref, err := parseWsRef(args[0])
			if err != nil {
				return exitClientError, err
			}
			return listWorkspaceFiles(cmd.Context(), c, ref, version, o, cmd.OutOrStdout())
		})
	cmd.Example = `  pyexec ws ls
  pyexec ws ls proj
  pyexec ws ls proj:data --version 3`
	cmd.Flags().Int64Var(&version, "version", client.WorkspaceHead, "a kept version (default: the current one)")
	cmd.ValidArgsFunction = completeWorkspaces
	return cmd
}

func listWorkspaces(ctx context.Context, c *client.Client, o clientOptions, w io.Writer) (int, error) {
	list, err := c.ListWorkspaces(ctx)
	if err != nil {
		return exitClientError, err
	}
	return printList(w, o, list, list, func(ws client.Workspace) string { return ws.Name },
		"NAME\tVERSION\tFILES\tSIZE\tQUOTA\tUPDATED", func(ws client.Workspace) string {
			return fmt.Sprintf("%s\t%d\t%d\t%s\t%s\t%s", ws.Name, ws.Version, ws.Files, humanSize(ws.Bytes), humanSize(ws.QuotaBytes),
				ws.Updated.Local().Format("2006-01-02 15:04:05"))
		})
}

func listWorkspaceFiles(ctx context.Context, c *client.Client, ref wsRef, version int64, o clientOptions, w io.Writer) (int, error) {
	files, err := c.WorkspaceFiles(ctx, ref.name, ref.path, version)
	if err != nil {
		return exitClientError, err
	}
	return printList(w, o, files, files, func(f client.WorkspaceFile) string { return f.Path },
		"PATH\tTYPE\tSIZE\tMODE\tMODIFIED", func(f client.WorkspaceFile) string {
			p, size, mod := f.Path, "", ""
			switch f.Type {
			case "file":
				size, mod = humanSize(f.Size), f.ModTime.Local().Format("2006-01-02 15:04:05")
			case "dir":
				p += "/"
			case "symlink":
				p += " -> " + f.Target
			}
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", p, f.Type, size, f.Mode.Perm(), mod)
		})
}

func newWsPushCmd() *cobra.Command {
	cmd := newClientCmd("push <local-file-or-folder> <NAME[:DIR]>", "Copy a local file or folder into a workspace", cobra.ExactArgs(2),
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			ref, err := parseWsRef(args[1])
			if err != nil {
				return exitClientError, err
			}
			tarData, err := pushArchive(args[0])
			if err != nil {
				return exitClientError, err
			}
			commit, err := o.newClient().UploadWorkspace(cmd.Context(), ref.name, ref.path, bytes.NewReader(tarData))
			if err != nil {
				return exitClientError, err
			}
			return printCommit(cmd, ref, commit, o)
		})
	cmd.Long = `Upload a local file, or the files of a local folder, into a workspace as one
new version (a tar; all or nothing). A folder's contents go into DIR (the top
of the workspace when DIR is not given), keeping their paths; a file goes into
DIR under its own name. Files already there are replaced; others stay.
.git, __pycache__ and similar folders are left out, and a symbolic link or
special file in the folder is an error.`
	cmd.Example = `  pyexec ws push ./src proj:src
  pyexec ws push data.csv proj:data`
	return cmd
}

// pushArchive is the tar of what push sends: the files of a folder, or
// one file under its base name.
func pushArchive(local string) ([]byte, error) {
	st, err := os.Stat(local)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		return client.TarFromDirectory(local)
	}
	return client.TarFromFiles([]string{local})
}

func newWsPullCmd() *cobra.Command {
	var version int64
	cmd := newClientCmd("pull <NAME[:PATH]> [local]", "Copy a workspace, or a file or folder of it, to the local disk", cobra.RangeArgs(1, 2),
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			ref, err := parseWsRef(args[0])
			if err != nil {
				return exitClientError, err
			}
			dest := ""
			if len(args) == 2 {
				dest = args[1]
			}
			return pullWorkspace(cmd.Context(), o.newClient(), ref, version, dest, cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		})
	cmd.Long = `Download a file of a workspace, or a folder (the whole workspace without a
PATH) with what it holds. A file goes to local (its own name in the current
folder when local is not given, into local when that is a folder, "-" for
stdout). A folder's contents go into the folder local (created; by default the
folder's own name, or the workspace's), replacing files of the same paths.`
	cmd.Example = `  pyexec ws pull proj                       # into ./proj
  pyexec ws pull proj:out/report.csv -      # to stdout
  pyexec ws pull proj:data ./data --version 2`
	cmd.Flags().Int64Var(&version, "version", client.WorkspaceHead, "a kept version (default: the current one)")
	return cmd
}

// pullWorkspace copies ref to dest: a file by itself, a folder by its tar.
func pullWorkspace(ctx context.Context, c *client.Client, ref wsRef, version int64, dest string, stdout, stderr io.Writer, o clientOptions) (int, error) {
	if ref.path != "" {
		rc, err := c.OpenWorkspaceFile(ctx, ref.name, ref.path, version)
		var ae *client.APIError
		switch {
		case err == nil:
			defer rc.Close()
			if dest == "" {
				dest = path.Base(ref.path)
			} else if st, err := os.Stat(dest); err == nil && st.IsDir() {
				dest = filepath.Join(dest, path.Base(ref.path))
			}
			if err := saveTo(rc, dest, stdout, ref.String()); err != nil {
				return exitClientError, err
			}
			return 0, nil
		case errors.As(err, &ae) && ae.StatusCode == 400:
			// a folder: pulled as a tar below
		default:
			return exitClientError, err
		}
	}
	if dest == "" {
		dest = ref.name
		if ref.path != "" {
			dest = path.Base(ref.path)
		}
	}
	if dest == "-" {
		return exitClientError, fmt.Errorf("%s is a folder: give a local folder to pull it into, not -", ref)
	}
	rc, err := c.WorkspaceArchive(ctx, ref.name, ref.path, version)
	if err != nil {
		return exitClientError, err
	}
	defer rc.Close()
	n, err := unpackInto(rc, dest, stderr)
	if err != nil {
		return exitClientError, fmt.Errorf("pulling %s into %s: %w", ref, dest, err)
	}
	if !o.quiet && !o.json {
		fmt.Fprintf(stderr, "%s: %d files into %s\n", ref, n, dest)
	}
	return 0, nil
}

// unpackInto writes the tar r into the folder dest (made when missing) and
// returns how many files it wrote. Everything is written through an
// os.Root, so no entry — a name with "..", an absolute name, a path
// through a symbolic link — lands outside dest; entries other than files,
// folders and links are skipped with a note on stderr.
func unpackInto(r io.Reader, dest string, stderr io.Writer) (int, error) {
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return 0, err
	}
	root, err := os.OpenRoot(dest)
	if err != nil {
		return 0, err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	files := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return files, err
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if name == "." || path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return files, fmt.Errorf("the archive holds an unsafe name %q", h.Name)
		}
		if dir := path.Dir(name); dir != "." {
			if err := root.MkdirAll(dir, 0o755); err != nil {
				return files, err
			}
		}
		mode := fs.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return files, err
			}
		case tar.TypeReg:
			if err := writeRootFile(root, name, mode, tr); err != nil {
				return files, err
			}
			files++
		case tar.TypeSymlink:
			_ = root.Remove(name)
			if err := root.Symlink(h.Linkname, name); err != nil {
				return files, err
			}
		default:
			fmt.Fprintf(stderr, "skipped %s: not a file, folder or link\n", name)
		}
	}
}

func writeRootFile(root *os.Root, name string, mode fs.FileMode, r io.Reader) (err error) {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode|0o200)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	_, err = io.Copy(f, r)
	return err
}

func newWsRmCmd() *cobra.Command {
	cmd := newClientCmd("rm <NAME[:PATH]>...", "Delete workspaces, or files and folders of one", idArgs("workspace", -1, cobra.MinimumNArgs(1)),
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			c := o.newClient()
			for _, a := range args {
				ref, err := parseWsRef(a)
				if err != nil {
					return exitClientError, err
				}
				if ref.path == "" {
					if err := c.DeleteWorkspace(cmd.Context(), ref.name); err != nil {
						return exitClientError, fmt.Errorf("%s: %w", ref, err)
					}
					if !o.quiet && !o.json {
						fmt.Fprintln(cmd.OutOrStdout(), ref)
					}
					continue
				}
				commit, err := c.RemoveWorkspaceFile(cmd.Context(), ref.name, ref.path)
				if err != nil {
					return exitClientError, fmt.Errorf("%s: %w", ref, err)
				}
				if code, err := printCommit(cmd, ref, commit, o); err != nil {
					return code, err
				}
			}
			return 0, nil
		})
	cmd.Long = `NAME deletes the workspace with all its versions. NAME:PATH deletes a file,
or a folder with what it holds, as a new version (the one before stays
restorable: see "pyexec ws versions" and "pyexec ws restore").`
	cmd.Example = `  pyexec ws rm proj:build
  pyexec ws rm scratch`
	cmd.ValidArgsFunction = completeWorkspaces
	return cmd
}

func newWsVersionsCmd() *cobra.Command {
	cmd := newClientCmd("versions <name>", "List the kept versions of a workspace, oldest first", idArgs("workspace name", 1, cobra.ExactArgs(1)),
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			vs, err := o.newClient().WorkspaceVersions(cmd.Context(), args[0])
			if err != nil {
				return exitClientError, err
			}
			if o.json {
				return 0, printJSON(cmd.OutOrStdout(), vs)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "VERSION\tFILES\tSIZE\tCREATED\tSOURCE")
			for _, v := range vs {
				fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\n", v.Number, v.Files, humanSize(v.Bytes), v.Created.Local().Format("2006-01-02 15:04:05"), v.Source)
			}
			return flushTable(tw)
		})
	cmd.ValidArgsFunction = completeWorkspaces
	return cmd
}

func newWsRestoreCmd() *cobra.Command {
	cmd := newClientCmd("restore <name> <version>", "Make a kept version the workspace's next one", idArgs("workspace name", 1, cobra.ExactArgs(2)),
		func(cmd *cobra.Command, args []string) (int, error) {
			o, err := readClientOptions(cmd)
			if err != nil {
				return exitClientError, err
			}
			n, err := strconv.ParseInt(args[1], 10, 64)
			if err != nil || n < 0 {
				return exitClientError, fmt.Errorf("%q is not a version number", args[1])
			}
			commit, err := o.newClient().RestoreWorkspace(cmd.Context(), args[0], n)
			if err != nil {
				return exitClientError, err
			}
			return printCommit(cmd, wsRef{name: args[0]}, commit, o)
		})
	cmd.ValidArgsFunction = completeWorkspaces
	return cmd
}

// printCommit says what a change made: the version on stdout, conflicts
// and refused paths on stderr (with --json, the commit as it came).
func printCommit(cmd *cobra.Command, ref wsRef, c *client.WorkspaceCommit, o clientOptions) (int, error) {
	if o.json {
		return 0, printJSON(cmd.OutOrStdout(), c)
	}
	if !o.quiet {
		what := "no change"
		if c.Changed {
			what = fmt.Sprintf("%d added, %d modified, %d deleted", c.Added, c.Modified, c.Deleted)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s: version %d (%s)\n", ref, c.Version, what)
	}
	for _, x := range c.Conflicts {
		kept := ""
		if x.KeptAs != "" {
			kept = "; yours is kept as " + x.KeptAs
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "conflict: %s: %s%s\n", x.Path, x.Reason, kept)
	}
	for _, x := range c.Refused {
		fmt.Fprintf(cmd.ErrOrStderr(), "refused: %s: %s\n", x.Path, x.Reason)
	}
	return 0, nil
}

// completeWorkspaces offers the caller's workspaces.
func completeWorkspaces(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	o, err := readClientOptions(cmd)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	list, err := o.newClient().ListWorkspaces(cmd.Context())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := make([]string, len(list))
	for i, w := range list {
		names[i] = w.Name
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
