package egress

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// relayTLS sends what the payload sends on a connection to files.pypi.org
// (allowed by its name only) through inspect and forwardTLS as a relay
// does, the destination answering with answer, and returns what reached
// the destination with the refusal reason.
func relayTLS(t *testing.T, sent, answer []byte) ([]byte, string) {
	t.Helper()
	e := New(Config{}, Policy{}, Hooks{})
	defer e.Close()
	r := &relay{e: e}
	payload, down := net.Pipe()
	up, dest := net.Pipe()
	go func() {
		_, _ = payload.Write(sent)
		payload.Close()
	}()
	sh := newServerHello()
	go func() {
		_, _ = io.Copy(io.Discard, watched{up, sh})
		sh.see(nil, io.EOF)
	}()
	got := make(chan []byte)
	go func() {
		_, _ = dest.Write(answer)
		b, _ := io.ReadAll(dest)
		got <- b
	}()
	_ = down.SetDeadline(time.Now().Add(5 * time.Second))
	op := inspect(down, "files.pypi.org")
	reason := op.reason
	if reason == "" {
		if op.kind != streamTLS {
			t.Fatalf("inspect took %q for stream %d", sent, op.kind)
		}
		reason = r.forwardTLS(up, down, op, sh, "files.pypi.org")
	}
	up.Close()
	down.Close()
	return <-got, reason
}

// serverFirst is a handshake record beginning a ServerHello with random.
func serverFirst(random []byte) []byte {
	msg := append([]byte{2, 0, 0, 38, 3, 3}, random...)
	return append([]byte{0x16, 3, 3, 0, byte(len(msg))}, msg...)
}

// TestSecondClientHello: after a HelloRetryRequest (TLS 1.3) the client's
// second ClientHello is checked as the first was, whether it comes after
// the server's answer or with the first; after an ordinary ServerHello
// what follows the hello flows as it is.
func TestSecondClientHello(t *testing.T) {
	good := record(hello(sniExt("files.pypi.org")))
	evil := record(hello(sniExt("evil.com")))
	ccs := []byte{0x14, 3, 3, 0, 1, 1}
	appData := []byte{0x17, 3, 3, 0, 3, 7, 7, 7}
	retry := serverFirst(helloRetryRandom[:])
	ordinary := serverFirst(make([]byte, 32))
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	tests := []struct {
		name              string
		sent, answer      []byte
		forwarded, reason string
	}{
		{"retry, the second hello naming another server", cat(good, ccs, evil), retry, string(cat(good, ccs)), ReasonSNIMismatch},
		{"retry, early data, then another server", cat(good, appData, evil), retry, string(cat(good, appData)), ReasonSNIMismatch},
		{"retry, the second hello naming the server", cat(good, ccs, good, appData), retry, string(cat(good, ccs, good, appData)), ""},
		{"retry, the second hello split over records", cat(good, ccs, splitHello(evil, 7, 50)), retry, string(cat(good, ccs)), ReasonSNIMismatch},
		{"retry, another protocol instead of a hello", cat(good, []byte("GET / HTTP/1.1\r\nHost: evil.com\r\n\r\n")), retry, string(good), ReasonBadClientHello},
		{"retry, a second hello cut short", cat(good, ccs, evil[:40]), retry, string(cat(good, ccs)), ReasonBadClientHello},
		{"no answer but an alert, then another hello", cat(good, evil), []byte{0x15, 3, 3, 0, 2, 2, 40}, string(good), ReasonSNIMismatch},
		{"an ordinary server hello, then anything", cat(good, ccs, evil, appData), ordinary, string(cat(good, ccs, evil, appData)), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			forwarded, reason := relayTLS(t, tt.sent, tt.answer)
			if reason != tt.reason || string(forwarded) != tt.forwarded {
				t.Errorf("got %q, %d bytes forwarded; want %q, %d bytes", reason, len(forwarded), tt.reason, len(tt.forwarded))
			}
		})
	}
}
