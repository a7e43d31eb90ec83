package sessions

import (
	"encoding/json"
	"testing"
)

// TestRequestAllowListOnTheWire: a request forwarded to another node
// keeps an empty allow list empty (refused there) instead of turning it
// into none, which would mean the operator's whole list.
func TestRequestAllowListOnTheWire(t *testing.T) {
	for name, allow := range map[string][]string{"empty": {}, "absent": nil, "one": {"allowed.test"}} {
		b, err := json.Marshal(Request{Network: true, NetworkAllow: allow})
		if err != nil {
			t.Fatal(err)
		}
		var got Request
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if (got.NetworkAllow == nil) != (allow == nil) || len(got.NetworkAllow) != len(allow) {
			t.Errorf("%s allow list %#v came back as %#v (%s)", name, allow, got.NetworkAllow, b)
		}
	}
}
