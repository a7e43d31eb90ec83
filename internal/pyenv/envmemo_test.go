package pyenv

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestEnvMemoFollowsTheFile: the base environment's description is read
// from memory only while its file is the one read — a rebuilt environment
// (a new file, here of the same size) or a recorded use is read again —
// and no caller can change what the next one gets.
func TestEnvMemoFollowsTheFile(t *testing.T) {
	m := &Environments{cfg: EnvConfig{Dir: t.TempDir()}}
	const key = "k1"
	dir := filepath.Join(envsDir(m.cfg), key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(installed ...string) {
		b, err := json.Marshal(Env{Python: "3.12.1", Installed: installed})
		if err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(dir, "new.json")
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, metaFile)); err != nil {
			t.Fatal(err)
		}
	}
	read := func() Env {
		t.Helper()
		env, err := m.baseEnv.read(m, key)
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	write("numpy", "pandas")
	first := read()
	if !slices.Equal(first.Installed, []string{"numpy", "pandas"}) || first.Key != key || first.Dir != dir {
		t.Fatalf("read %+v", first)
	}
	first.Installed[0] = "changed by a caller"
	if got := read().Installed; !slices.Equal(got, []string{"numpy", "pandas"}) {
		t.Errorf("after a caller changed its copy: %v", got)
	}
	write("numpy", "scipy") // rebuilt: same size, another file
	if got := read().Installed; !slices.Equal(got, []string{"numpy", "scipy"}) {
		t.Errorf("after a rebuild: %v, want numpy scipy", got)
	}
	used := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(filepath.Join(dir, metaFile), used, used); err != nil {
		t.Fatal(err)
	}
	if got := read().LastUsed; !got.Equal(used) {
		t.Errorf("last used %v after a recorded use, want %v", got, used)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := m.baseEnv.read(m, key); err == nil {
		t.Error("a removed environment was still read")
	}
}
