package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pyexec/pyexec/client"
)

// runFlags are the flags of run and submit that say what to upload.
type runFlags struct {
	files        []string
	entrypoint   string
	requirements string
	env          []string
	collect      []string
	stdin        string // --stdin: the program's standard input
	python       string // --python: the interpreter's version
}

// add defines the flags on cmd.
func (f *runFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringSliceVar(&f.files, "file", nil, "file to upload (repeatable); wins over a positional input")
	fs.StringVar(&f.entrypoint, "entrypoint", "", "file to run (default: main.py, __main__.py, else the first .py file)")
	fs.StringVar(&f.requirements, "requirements", "", "path of a requirements.txt to install first")
	fs.StringArrayVarP(&f.env, "env", "e", nil, "environment variable VAR=value, or VAR to pass the local value (repeatable)")
	fs.StringArrayVar(&f.collect, "collect", nil, "return only the files matching this glob, e.g. 'out/*.csv' (repeatable; default every file the run wrote)")
	fs.StringVar(&f.python, "python", "", `Python version, e.g. "3.12" (default: the server's; --image names it python-executor's way)`)
	addStdinFlag(cmd, &f.stdin)
	_ = cmd.MarkFlagFilename("requirements", "txt") // fails only for an unknown flag name
	_ = cmd.MarkFlagFilename("file")
}

// input is one upload: the archive and how it was found.
type input struct {
	tar []byte
	// entrypoint is the file to run when the input itself says so (a
	// single file, or code from stdin); empty means detect it.
	entrypoint string
}

// readInput finds the code to upload, in python-executor's order: --file
// flags, then a positional *.tar, directory or file, then stdin (as
// main.py; also when the positional input is "-"). positional holds the
// arguments before "--".
func readInput(positional, files []string, stdin io.Reader) (input, error) {
	if len(positional) > 1 {
		return input{}, fmt.Errorf("expected one file, directory or .tar, got %d: %s", len(positional), strings.Join(positional, " "))
	}
	switch {
	case len(files) > 0:
		if len(positional) == 1 {
			return input{}, fmt.Errorf("--file cannot be combined with the input %q: list every file with --file", positional[0])
		}
		tar, err := client.TarFromFiles(files)
		if err != nil {
			return input{}, err
		}
		return input{tar: tar}, nil
	case len(positional) == 1 && positional[0] != "-":
		return readPath(positional[0])
	}
	code, err := io.ReadAll(stdin)
	if err != nil {
		return input{}, fmt.Errorf("reading stdin: %w", err)
	}
	if len(code) == 0 {
		return input{}, errors.New("no input: give a file, directory or .tar, or pipe code on stdin")
	}
	tar, err := client.TarFromReader(bytes.NewReader(code), "main.py")
	if err != nil {
		return input{}, err
	}
	return input{tar: tar, entrypoint: "main.py"}, nil
}

// readPath reads a positional input: a .tar as is, a directory or a file.
func readPath(p string) (input, error) {
	if strings.HasSuffix(p, ".tar") {
		tar, err := os.ReadFile(p)
		if err != nil {
			return input{}, fmt.Errorf("reading archive: %w", err)
		}
		return input{tar: tar}, nil
	}
	fi, err := os.Stat(p)
	if err != nil {
		return input{}, err
	}
	if fi.IsDir() {
		tar, err := client.TarFromDirectory(p)
		if err != nil {
			return input{}, err
		}
		return input{tar: tar}, nil
	}
	tar, err := client.TarFromFiles([]string{p})
	if err != nil {
		return input{}, err
	}
	return input{tar: tar, entrypoint: filepath.Base(p)}, nil
}

// resolveEnv turns -e values into KEY=value pairs: VAR=value as given, a
// bare VAR with its value in the local environment (an error if unset).
func resolveEnv(specs []string, lookup func(string) (string, bool)) ([]string, error) {
	out := make([]string, 0, len(specs))
	for _, s := range specs {
		name, _, hasValue := strings.Cut(s, "=")
		if name == "" || strings.ContainsAny(name, " \t\n") {
			return nil, fmt.Errorf("invalid environment variable %q: want VAR or VAR=value", s)
		}
		if hasValue {
			out = append(out, s)
			continue
		}
		v, ok := lookup(name)
		if !ok {
			return nil, fmt.Errorf("environment variable %s is not set", name)
		}
		out = append(out, name+"="+v)
	}
	return out, nil
}

// buildExecution assembles the archive and metadata of run and submit.
// args are the command's arguments; those after "--" go to the script.
func buildExecution(cmd *cobra.Command, args []string, f *runFlags, o clientOptions) ([]byte, *client.Metadata, error) {
	positional, scriptArgs := args, []string(nil)
	if at := cmd.ArgsLenAtDash(); at >= 0 {
		positional, scriptArgs = args[:at], args[at:]
	}
	meta := &client.Metadata{DockerImage: o.image, ScriptArgs: scriptArgs, Config: o.config()}
	meta.Collect = f.collect
	if f.python != "" {
		if o.image != "" {
			return nil, nil, errors.New("--python and --image both choose the interpreter: give one of them")
		}
		// The wire names an interpreter as python-executor's image did.
		meta.DockerImage = "python:" + f.python
	}
	codeFromStdin := len(f.files) == 0 && (len(positional) == 0 || positional[0] == "-")
	if err := programInput(f.stdin, cmd.InOrStdin(), codeFromStdin, &meta.Stdin, &meta.StdinEncoding); err != nil {
		return nil, nil, err
	}
	in, err := readInput(positional, f.files, cmd.InOrStdin())
	if err != nil {
		return nil, nil, err
	}
	entry := f.entrypoint
	if entry == "" {
		entry = in.entrypoint
	}
	if entry == "" {
		if entry, err = client.DetectEntrypoint(in.tar); err != nil {
			return nil, nil, fmt.Errorf("choosing the file to run (use --entrypoint): %w", err)
		}
	}
	meta.Entrypoint = entry
	if meta.EnvVars, err = resolveEnv(f.env, os.LookupEnv); err != nil {
		return nil, nil, err
	}
	if f.requirements != "" {
		req, err := os.ReadFile(f.requirements)
		if err != nil {
			return nil, nil, fmt.Errorf("reading requirements: %w", err)
		}
		meta.RequirementsTxt = string(req)
	}
	return in.tar, meta, nil
}
