package testserver

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// What a killed server leaves below its data directory (nested mounts, a
// name with a space) is found and detached, deepest first, and the
// directory can then be removed.
func TestUnmountBelowFreesADataDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount")
	}
	data := t.TempDir()
	slots, nested, spaced := filepath.Join(data, "workspace-slots"), filepath.Join(data, "workspace-slots", "jail"),
		filepath.Join(data, "runs", "a run")
	for _, m := range []string{slots, nested, spaced} {
		if err := os.MkdirAll(m, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", m, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
	}
	found, err := MountsBelow(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 3 || found[0] != nested || !slices.Contains(found, spaced) || !slices.Contains(found, slots) {
		t.Fatalf("MountsBelow = %q; want the three, the nested one first", found)
	}
	done, err := UnmountBelow(data)
	if err != nil || len(done) != 3 {
		t.Fatalf("UnmountBelow = %q, %v", done, err)
	}
	if left, _ := MountsBelow(data); len(left) > 0 {
		t.Fatalf("still mounted: %q", left)
	}
	if err := os.RemoveAll(data); err != nil {
		t.Errorf("removing the data directory: %v", err)
	}
}
