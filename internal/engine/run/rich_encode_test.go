package run

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestFastDataWritesTheSameBytes: a bundle in its fast form encodes to the
// bytes of the bundle as json.RawMessage, with and without HTML escaping,
// for every kind of value the driver sends.
func TestFastDataWritesTheSameBytes(t *testing.T) {
	data := map[string]json.RawMessage{
		"image/png":        json.RawMessage(`"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="`),
		"text/plain":       json.RawMessage(`"<Figure size 640x480 with 1 Axes>"`),
		"text/html":        json.RawMessage(`"<em>caf\u00e9</em> & caf` + "é\u2028" + `"`),
		"text/markdown":    json.RawMessage(`"a \"quoted\"\n\ttext"`),
		"text/latex":       json.RawMessage(`"$x^2$"`),
		"text/x-unicode":   json.RawMessage("\"café \u2028\""),
		"application/json": json.RawMessage(`{"a": [1, 2.50, "x"], "b": null}`),
		"empty":            json.RawMessage(`""`),
	}
	for _, escape := range []bool{true, false} {
		encode := func(v any) string {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(escape)
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
			return b.String()
		}
		fast := FastData(data)
		want, got := encode(data), encode(fast)
		if got != want {
			t.Errorf("escape HTML %v:\n got %s\nwant %s", escape, got, want)
		}
		if _, ok := fast["image/png"].(string); !ok {
			t.Errorf("the PNG is a %T, want a string", fast["image/png"])
		}
	}
}
