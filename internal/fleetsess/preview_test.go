package fleetsess

import (
	"context"
	"errors"
	"testing"

	"github.com/pyexec/pyexec/internal/engine"
	"github.com/pyexec/pyexec/internal/preview"
)

// TestShareHolderAsksNoOne: a preview URL's node is the live node its
// token names, found from the membership list alone: this node's own
// tag, a tag no live node has, and any number of them, are answered
// without a message to the fleet (the router has no NATS connection
// here); a URL from the registry that --advertise-url would refuse is
// not relayed to.
func TestShareHolderAsksNoOne(t *testing.T) {
	urls := map[string]string{"a": "http://10.0.0.1:8080", "b": "https://b.example", "c": "http://0.0.0.0:8080",
		"d": "file:///etc/passwd", "e": "http://user:pw@e.example"}
	r := &Router{cfg: Config{Node: "a",
		Nodes:   func() []string { return []string{"a", "b", "c", "d", "e"} },
		NodeURL: func(n string) (string, error) { return urls[n], nil }}}
	ctx := context.Background()
	if u, err := r.ShareHolder(ctx, preview.IssuerTag("b")); err != nil || u != "https://b.example" {
		t.Errorf("b's token: %q, %v", u, err)
	}
	for range 1000 {
		for _, tag := range []string{preview.IssuerTag("a"), preview.IssuerTag("gone"), "00000000"} {
			if u, err := r.ShareHolder(ctx, tag); err != nil || u != "" {
				t.Fatalf("tag %s: %q, %v; want this node to answer", tag, u, err)
			}
		}
	}
	for _, n := range []string{"c", "d", "e"} {
		if u, err := r.ShareHolder(ctx, preview.IssuerTag(n)); !errors.Is(err, engine.ErrPreviewRelay) {
			t.Errorf("node %s advertising %s: %q, %v; want it refused", n, urls[n], u, err)
		}
	}
}
