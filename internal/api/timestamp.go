package api

import (
	"fmt"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// timeLayout is RFC 3339 with exactly six fractional digits. Go's own
// encoding drops trailing zeros (and writes nine digits when it can), but
// python-executor's Python client parses times with
// datetime.fromisoformat, which before Python 3.11 takes only three or six
// digits: a fixed width is the one form every client reads.
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

// Time is every timestamp on the wire: UTC, RFC 3339, microseconds,
// always six fractional digits ("2026-01-02T03:04:05.120000Z").
type Time struct{ time.Time }

// wireTime is t as it goes on the wire.
func wireTime(t time.Time) Time { return Time{t.UTC().Truncate(time.Microsecond)} }

// wireTimePtr is wireTime of *t, or nil.
func wireTimePtr(t *time.Time) *Time {
	if t == nil {
		return nil
	}
	w := wireTime(*t)
	return &w
}

// String is the wire form.
func (t Time) String() string { return t.UTC().Format(timeLayout) }

// MarshalJSON writes the wire form.
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + t.String() + `"`), nil
}

// UnmarshalJSON reads any RFC 3339 time (for clients and tests).
func (t *Time) UnmarshalJSON(b []byte) error {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return fmt.Errorf("time must be an RFC 3339 string, got %s", b)
	}
	v, err := time.Parse(time.RFC3339Nano, string(b[1:len(b)-1]))
	if err != nil {
		return err
	}
	t.Time = v
	return nil
}

// Schema publishes the type as a date-time string (huma.SchemaProvider).
func (Time) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{Type: huma.TypeString, Format: "date-time",
		Description: "RFC 3339 in UTC with exactly 6 fractional digits", Examples: []any{"2026-01-02T03:04:05.120000Z"}}
}
