package pyenv

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// envMemo keeps the decoded env.json of one environment (the base one,
// leased for nearly every execution) while the file is unchanged: its
// inode, size and modification time are what they were when it was read.
// A rebuild writes a new file; a use recorded by this process or another
// (touch) changes the time. Reading and decoding the file was ≈ 3 % of a
// busy server's CPU; a stat is what remains.
type envMemo struct {
	mu   sync.Mutex
	key  string
	id   fileID
	env  Env
	full bool
}

// fileID is what tells a file replaced or touched from the one read.
type fileID struct {
	ino  uint64
	size int64
	mod  time.Time
}

func statID(path string) (fileID, error) {
	st, err := os.Stat(path)
	if err != nil {
		return fileID{}, err
	}
	id := fileID{size: st.Size(), mod: st.ModTime()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		id.ino = sys.Ino
	}
	return id, nil
}

// read is m.readEnv(key), from memory while env.json is unchanged. The
// caller gets its own copy of the lists.
func (c *envMemo) read(m *Environments, key string) (Env, error) {
	id, err := statID(filepath.Join(envsDir(m.cfg), key, metaFile))
	if err != nil {
		return Env{}, err
	}
	c.mu.Lock()
	hit := c.full && c.key == key && c.id == id
	env := c.env
	c.mu.Unlock()
	if !hit {
		// Replaced after the stat: the memo holds the new content under
		// the old identity, which the next stat no longer matches.
		if env, err = m.readEnv(key); err != nil {
			return Env{}, err
		}
		c.mu.Lock()
		c.key, c.id, c.env, c.full = key, id, env, true
		c.mu.Unlock()
	}
	env.Requirements = slices.Clone(env.Requirements)
	env.Installed = slices.Clone(env.Installed)
	env.NotInstalled = slices.Clone(env.NotInstalled)
	return env, nil
}
