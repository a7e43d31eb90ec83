package run

import "encoding/json"

// encoding/json validates and compacts every json.RawMessage it writes, a
// byte at a time through its scanner: for a figure's base64 that is most
// of the server's JSON work, repeated in the display event, the record and
// the HTTP response. A Go string is written about four times faster.

// FastData is data, the MIME bundle of an Output, as encoding/json writes
// it quickly and with the same bytes: each value that is a JSON string of
// plain ASCII (no escapes, no character that HTML escaping or compaction
// would change; every base64 image) becomes a Go string, the others stay
// json.RawMessage. data's values must be valid JSON, as the driver's
// decoder leaves them.
func FastData(data map[string]json.RawMessage) map[string]any {
	if data == nil {
		return nil
	}
	out := make(map[string]any, len(data))
	for k, v := range data {
		if s, ok := plainString(v); ok {
			out[k] = s
		} else {
			out[k] = v
		}
	}
	return out
}

// plainString returns the content of v when v is a JSON string whose
// bytes encoding/json writes unchanged both as a string and as a
// json.RawMessage, with or without HTML escaping.
func plainString(v json.RawMessage) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	for _, c := range inner {
		if !plainByte(c) {
			return "", false
		}
	}
	return string(inner), true
}

// plainByte says whether plainString accepts c: printable ASCII but the
// quote, the backslash and the three characters HTML escaping replaces.
func plainByte(c byte) bool {
	switch c {
	case '"', '\\', '<', '>', '&':
		return false
	}
	return c >= 0x20 && c < 0x7f
}

// FastOutput is an Output as encoding/json writes it quickly; its fields
// and their order are Output's.
type FastOutput struct {
	Type     string          `json:"type"`
	Data     map[string]any  `json:"data"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// FastOutputs converts outs to FastOutputs.
func FastOutputs(outs []Output) []FastOutput {
	if outs == nil {
		return nil
	}
	f := make([]FastOutput, len(outs))
	for i, o := range outs {
		f[i] = FastOutput{Type: o.Type, Data: FastData(o.Data), Metadata: o.Metadata}
	}
	return f
}
