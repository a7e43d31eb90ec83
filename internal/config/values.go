package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// secondsValue is a pflag.Value for durations written as whole seconds
// ("30", the python-executor convention) or as a Go duration ("1m30s").
type secondsValue struct{ d *time.Duration }

func (v secondsValue) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v secondsValue) Set(s string) error {
	d, err := parseSeconds(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

func (secondsValue) Type() string { return "seconds" }

func parseSeconds(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n > int64(time.Duration(1<<63-1)/time.Second) || n < 0 {
			return 0, fmt.Errorf("%d seconds is out of range", n)
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errors.New("want whole seconds or a duration such as 90s, 5m, 24h")
	}
	return d, nil
}

// sizeValue is a pflag.Value for byte sizes: a plain number of bytes or a
// number with a binary suffix (KiB, MiB, GiB; K, M, G mean the same).
type sizeValue struct{ n *int64 }

func (v sizeValue) String() string {
	if v.n == nil {
		return ""
	}
	return formatSize(*v.n)
}

func (v sizeValue) Set(s string) error {
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	*v.n = n
	return nil
}

func (sizeValue) Type() string { return "bytes" }

func parseSize(s string) (int64, error) {
	// Longest suffixes first, so "MiB" is not read as "M" + "iB".
	units := [...]struct {
		suffix string
		shift  uint
	}{
		{"KiB", 10}, {"MiB", 20}, {"GiB", 30},
		{"K", 10}, {"M", 20}, {"G", 30}, {"B", 0},
	}
	s = strings.TrimSpace(s)
	shift := uint(0)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, shift = strings.TrimSpace(rest), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("want a number of bytes, optionally with KiB, MiB or GiB")
	}
	if n > (1<<63-1)>>shift {
		return 0, errors.New("size is out of range")
	}
	return n << shift, nil
}

func formatSize(n int64) string {
	switch {
	case n != 0 && n%(1<<30) == 0:
		return strconv.FormatInt(n>>30, 10) + "GiB"
	case n != 0 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MiB"
	case n != 0 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KiB"
	}
	return strconv.FormatInt(n, 10)
}
