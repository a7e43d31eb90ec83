package config

import "github.com/spf13/pflag"

// Followers bounds the live event streams (GET …/events) the server keeps
// open. Each holds a few events whatever the output's size, so these caps
// bound the memory that following can take.
type Followers struct {
	// PerExecution bounds the streams of one execution on this server,
	// PerKey the streams of one API key (all executions together).
	PerExecution int
	PerKey       int
}

func defaultFollowers() Followers { return Followers{PerExecution: 100, PerKey: 200} }

func (f *Followers) bind(fs *pflag.FlagSet) {
	fs.IntVar(&f.PerExecution, "max-followers", f.PerExecution, "")
	describe(fs, "max-followers", "event streams of one execution open at once on this server; beyond, 429")
	fs.IntVar(&f.PerKey, "max-followers-per-key", f.PerKey, "")
	describe(fs, "max-followers-per-key", "event streams of one API key open at once on this server; beyond, 429")
}

func (c *Config) validateFollowers(bad func(env, format string, args ...any)) {
	if c.Followers.PerExecution < 1 {
		bad("PYEXEC_MAX_FOLLOWERS", "must be at least 1, got %d", c.Followers.PerExecution)
	}
	if c.Followers.PerKey < 1 {
		bad("PYEXEC_MAX_FOLLOWERS_PER_KEY", "must be at least 1, got %d", c.Followers.PerKey)
	}
}
