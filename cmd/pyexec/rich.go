package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // image.DecodeConfig of JPEG outputs
	_ "image/png"  // image.DecodeConfig of PNG outputs
	"io"
	"os"
	"path"
	"strings"

	"github.com/pyexec/pyexec/client"
)

// richNotes writes one line on w per rich output and file of a result:
// "[image/png 640x480]", "[text/html]", "[file out/report.csv 1.2 KiB]".
// A result output that is only text/plain is left out: eval prints it.
func richNotes(w io.Writer, r *client.ExecutionResult) {
	for _, o := range r.Outputs {
		if note := outputNote(o); note != "" {
			fmt.Fprintln(w, note)
		}
	}
	if r.OutputsTruncated {
		fmt.Fprintln(w, "[more outputs left out: too large]")
	}
	fileNotes(w, r)
}

// fileNotes writes one line on w per file of a result.
func fileNotes(w io.Writer, r *client.ExecutionResult) {
	for _, f := range r.Files {
		fmt.Fprintf(w, "[file %s %s]\n", f.Path, humanSize(f.Size))
	}
	if r.FilesOmitted > 0 {
		fmt.Fprintf(w, "[%d more files left out by the server's limits]\n", r.FilesOmitted)
	}
}

// outputNote describes an output by its richest MIME type.
func outputNote(o client.Output) string {
	if mime, data, ok := o.Image(); ok {
		if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil {
			return fmt.Sprintf("[%s %dx%d]", mime, cfg.Width, cfg.Height)
		}
		return fmt.Sprintf("[%s %s]", mime, humanSize(int64(len(data))))
	}
	for _, mime := range []string{"text/html", "text/markdown", "text/latex", "application/json"} {
		if _, ok := o.Data[mime]; ok {
			return "[" + mime + "]"
		}
	}
	if o.Type == client.OutputResult {
		return ""
	}
	if text, ok := o.Text("text/plain"); ok {
		return "[text/plain] " + firstLine(text)
	}
	return ""
}

func firstLine(s string) string {
	line, rest, _ := strings.Cut(s, "\n")
	const max = 80
	if len(line) > max {
		return line[:max] + "…"
	}
	if rest != "" {
		return line + " …"
	}
	return line
}

// humanSize writes n bytes as "512 B", "1.2 KiB", "3.0 MiB".
func humanSize(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, units := float64(n)/1024, []string{"KiB", "MiB", "GiB", "TiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// imageExt is the file extension of an image MIME type.
func imageExt(mime string) string {
	switch mime {
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/svg+xml":
		return ".svg"
	}
	return ".bin"
}

// saveOutputs writes a result's images as output-N.EXT (N is the output's
// position, from 1) and downloads its files under dir, keeping their
// paths. Paths come from the server, so they are opened through an
// os.Root: none can land outside dir. It returns the paths written.
func saveOutputs(ctx context.Context, c *client.Client, r *client.ExecutionResult, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("outputs dir: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("outputs dir: %w", err)
	}
	defer root.Close()
	var saved []string
	for i, o := range r.Outputs {
		mime, data, ok := o.Image()
		if !ok {
			continue
		}
		name := fmt.Sprintf("output-%d%s", i+1, imageExt(mime))
		if err := root.WriteFile(name, data, 0o644); err != nil {
			return saved, fmt.Errorf("saving %s: %w", name, err)
		}
		saved = append(saved, name)
	}
	for _, f := range r.Files {
		if err := saveFile(ctx, c, root, r.ExecutionID, f.Path); err != nil {
			return saved, err
		}
		saved = append(saved, f.Path)
	}
	return saved, nil
}

// saveFile downloads one file of an execution to its path under root.
func saveFile(ctx context.Context, c *client.Client, root *os.Root, id, unsafePath string) error {
	p := path.Clean(unsafePath)
	if !localPath(p) {
		return fmt.Errorf("the server named a file outside the workspace: %q", unsafePath)
	}
	if dir := path.Dir(p); dir != "." {
		if err := root.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("saving %s: %w", p, err)
		}
	}
	rc, err := c.DownloadFile(ctx, id, p)
	if err != nil {
		return fmt.Errorf("downloading %s: %w", p, err)
	}
	defer rc.Close()
	out, err := root.Create(p)
	if err != nil {
		return fmt.Errorf("saving %s: %w", p, err)
	}
	_, err = io.Copy(out, rc)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("saving %s: %w", p, err)
	}
	return nil
}

// localPath reports whether a clean slash path stays inside its root.
func localPath(p string) bool {
	return p != "." && p != ".." && !path.IsAbs(p) && !strings.HasPrefix(p, "../")
}

// finishRich follows printResult for run and eval: the notes on stderr
// (unless -q or --json), then, with --outputs-dir, the images and files
// saved to disk. A failure to save makes the command fail even when the
// script succeeded.
func finishRich(ctx context.Context, c *client.Client, stderr io.Writer, r *client.ExecutionResult, o clientOptions, outputsDir string, code int, err error) (int, error) {
	if !o.quiet && !o.json {
		richNotes(stderr, r)
	}
	if outputsDir == "" {
		return code, err
	}
	saved, serr := saveOutputs(ctx, c, r, outputsDir)
	if o.verbose {
		for _, p := range saved {
			fmt.Fprintf(stderr, "saved %s\n", path.Join(outputsDir, p))
		}
	}
	if serr != nil {
		if code == 0 {
			code = exitClientError
		}
		return code, errors.Join(err, serr)
	}
	return code, err
}
