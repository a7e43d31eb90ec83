package workspace_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/pyexec/pyexec/internal/workspace"
)

// A key's workspace on one node: create it, write a file, list it, and
// restore the version before a change.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "workspace-example-")
	defer os.RemoveAll(dir)
	m, err := workspace.OpenLocal(workspace.Config{Dir: dir, UID: -1, GID: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	alice := workspace.Caller{Name: "alice"}
	ref := workspace.Ref{Name: "notes"}
	if _, err := m.Create(ctx, alice, "notes", 10<<20); err != nil {
		fmt.Println(err)
		return
	}
	c, _ := m.WriteFile(ctx, alice, ref, "todo/today.md", strings.NewReader("- ship it\n"), 0, 1<<20)
	fmt.Println("version", c.Version)
	c, _ = m.WriteFile(ctx, alice, ref, "todo/today.md", strings.NewReader("- shipped\n"), 0, 1<<20)
	fmt.Println("version", c.Version)
	files, _ := m.Files(ctx, alice, ref, workspace.Head, "")
	for _, f := range files {
		fmt.Println(f.Type, f.Path, f.Size)
	}
	c, _ = m.Restore(ctx, alice, ref, 1)
	fmt.Println("restored as version", c.Version)
	// Another key is told the workspace does not exist.
	_, err = m.Get(ctx, workspace.Caller{Name: "bob"}, ref)
	fmt.Println(err)
	// Output:
	// version 1
	// version 2
	// dir todo 0
	// file todo/today.md 10
	// restored as version 3
	// not found: workspace "notes"
}
