package config

import "github.com/spf13/pflag"

// Fairness bounds what one API key (or the anonymous client) may hold of
// this server's execution slots and queue. Slots go to the keys in turn
// whatever these are; they cap how much a key may take at all.
type Fairness struct {
	// MaxRunningPerKey bounds one key's executions running at once,
	// MaxQueuedPerKey those waiting for a slot (beyond, 429). Zero: no
	// bound beyond --max-concurrency and --queue-size.
	MaxRunningPerKey int
	MaxQueuedPerKey  int
}

func (f *Fairness) bind(fs *pflag.FlagSet) {
	fs.IntVar(&f.MaxRunningPerKey, "max-running-per-key", f.MaxRunningPerKey, "")
	describe(fs, "max-running-per-key", "executions of one API key running at once on this server, the rest wait; 0: no cap beyond --max-concurrency")
	fs.IntVar(&f.MaxQueuedPerKey, "max-queued-per-key", f.MaxQueuedPerKey, "")
	describe(fs, "max-queued-per-key", "executions of one API key waiting for a slot on this server; beyond, 429; 0: no cap beyond --queue-size")
}

func (c *Config) validateFairness(bad func(env, format string, args ...any)) {
	if c.Fairness.MaxRunningPerKey < 0 {
		bad("PYEXEC_MAX_RUNNING_PER_KEY", "must not be negative, got %d", c.Fairness.MaxRunningPerKey)
	}
	if c.Fairness.MaxQueuedPerKey < 0 {
		bad("PYEXEC_MAX_QUEUED_PER_KEY", "must not be negative, got %d", c.Fairness.MaxQueuedPerKey)
	}
}
