package egress

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"testing"
	"time"
)

// relayTLS relays a connection to files.pypi.org, allowed by its name
// only, as the egress does: the payload sends sent, the destination
// answers with answer. It returns what reached the destination with the
// refusal reason.
func relayTLS(t *testing.T, sent, answer []byte) ([]byte, string) {
	t.Helper()
	var forwarded []byte
	reason := relayRun(t, "files.pypi.org", func(c net.Conn) {
		go func() { _, _ = io.Copy(io.Discard, c) }()
		_, _ = c.Write(sent) // then the payload's end is closed
	}, func(c net.Conn) {
		_, _ = c.Write(answer)
		forwarded, _ = io.ReadAll(c)
	})
	return forwarded, reason
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

// relayRun relays a connection to name, allowed by its name only, as the
// egress does (relay.run), with client on the payload's end and serve on
// the destination's; it returns the event's reason.
func relayRun(t *testing.T, name string, client, serve func(net.Conn)) string {
	t.Helper()
	e := New(Config{}, Grant{}, Hooks{})
	defer e.Close()
	r := &relay{e: e}
	payload, down := net.Pipe()
	up, dest := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		serve(dest)
		dest.Close()
	}()
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		r.run(down, up, target{host: name, name: name, port: 443})
	}()
	client(payload)
	payload.Close()
	<-ran
	<-done
	return r.ev.Reason
}

// selfSigned is a certificate for name alone, signed by its own key.
func selfSigned(t *testing.T, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// echFrontEnd is a TLS front end serving a site per server name and
// holding an Encrypted ClientHello key whose public name is public, as a
// provider hosting many sites on its addresses does; configs is its
// ECHConfigList, as its DNS would publish it.
func echFrontEnd(t *testing.T, public string, sites ...string) (conf *tls.Config, configs []byte) {
	t.Helper()
	key, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// config_id, DHKEM(X25519, HKDF-SHA256) and its public key; one suite
	// (HKDF-SHA256, AES-128-GCM); maximum_name_length; public_name; no
	// extensions.
	c := append([]byte{1, 0, 0x20, 0, 32}, key.PublicKey().Bytes()...)
	c = append(c, 0, 4, 0, 1, 0, 1, 0, byte(len(public)))
	c = append(append(c, public...), 0, 0)
	config := append([]byte{0xfe, 0x0d, byte(len(c) >> 8), byte(len(c))}, c...)
	certs := map[string]tls.Certificate{}
	for _, s := range append(sites, public) {
		certs[s] = selfSigned(t, s)
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			c, ok := certs[hello.ServerName]
			if !ok {
				return nil, fmt.Errorf("no site %q", hello.ServerName)
			}
			return &c, nil
		},
		EncryptedClientHelloKeys: []tls.EncryptedClientHelloKey{{Config: config, PrivateKey: key.Bytes()}},
	}, append([]byte{byte(len(config) >> 8), byte(len(config))}, config...)
}

// TestEncryptedClientHello: a ClientHello whose outer server name is the
// name allowed but which carries another, encrypted (ECH), is refused:
// the front end serves the encrypted name. A payload can make such a
// hello for any provider that offers ECH (a client may choose the outer
// name; here the provider's public name is the name allowed, so that Go's
// client can make it).
func TestEncryptedClientHello(t *testing.T) {
	front, configs := echFrontEnd(t, "files.pypi.org", "evil.com")
	var accepted bool
	client := func(c net.Conn) {
		tc := tls.Client(c, &tls.Config{ServerName: "evil.com", MinVersion: tls.VersionTLS13, InsecureSkipVerify: true,
			EncryptedClientHelloConfigList: configs})
		accepted = tc.Handshake() == nil && tc.ConnectionState().ECHAccepted
		c.Close() // no close_notify: net.Pipe would hold it until read
	}
	var served string
	serve := func(c net.Conn) {
		tc := tls.Server(c, front)
		if tc.Handshake() == nil {
			served = tc.ConnectionState().ServerName
		}
		c.Close()
	}
	// Directly, the front end serves evil.com.
	c, s := net.Pipe()
	done := make(chan struct{})
	go func() { serve(s); close(done) }()
	client(c)
	<-done
	if !accepted || served != "evil.com" {
		t.Fatalf("directly: ECH accepted %v, served %q", accepted, served)
	}
	accepted, served = false, ""
	if reason := relayRun(t, "files.pypi.org", client, serve); reason != ReasonBadClientHello || accepted || served != "" {
		t.Errorf("through the egress: %q, ECH accepted %v, served %q; want %s", reason, accepted, served, ReasonBadClientHello)
	}
}
