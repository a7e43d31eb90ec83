package egress

import (
	"crypto/tls"
	"testing"
)

// A TLS session begun with one port of a host is not offered to another
// port of the same name: the two may be different services.
func TestSessionsKeyedByPort(t *testing.T) {
	cache := tls.NewLRUClientSessionCache(4)
	web, other := portSessions{cache, 443}, portSessions{cache, 8443}
	cs := &tls.ClientSessionState{}
	web.Put("api.example.test", cs)
	if got, ok := web.Get("api.example.test"); !ok || got != cs {
		t.Fatalf("the same name and port: %v %v, want the session put", got, ok)
	}
	if got, ok := other.Get("api.example.test"); ok {
		t.Fatalf("another port of the same name was offered %v", got)
	}
}
