package egress

import (
	"encoding/binary"
	"errors"
)

var (
	errNotHello  = errors.New("not a client hello")
	errBadHello  = errors.New("malformed client hello")
	errTwoNames  = errors.New("client hello names more than one server")
	errRepeatExt = errors.New("client hello repeats an extension")
	errHidden    = errors.New("client hello carries an encrypted server name")
)

// Extensions of a ClientHello that carry a server name.
const (
	extServerName = 0
	// extECH (Encrypted ClientHello, RFC 9849) carries a whole inner
	// ClientHello, server name included, that the server decrypts and
	// serves instead of the outer one; extESNI is its draft predecessor.
	extECH  = 0xfe0d
	extESNI = 0xffce
)

// clientHelloSNI returns the host name in the server_name extension of a
// TLS ClientHello handshake message, "" when it has none. The whole
// message is parsed and refused where a strict server refuses it (bytes
// left over in any part, an extension twice, two host names), so that the
// name read here is the one a server reads; a hello that carries an
// encrypted server name (ECH, ESNI), which a server would serve instead,
// is refused too.
func clientHelloSNI(b []byte) (string, error) {
	r := reader(b)
	typ, ok := r.u8()
	if !ok || typ != 1 {
		return "", errNotHello
	}
	if n, ok := r.u24(); !ok || n != len(r) {
		return "", errBadHello
	}
	// version and random, session id, cipher suites, compression methods
	if !r.skip(2 + 32) {
		return "", errBadHello
	}
	session, ok1 := r.vec8()
	suites, ok2 := r.vec16()
	methods, ok3 := r.vec8()
	if !ok1 || !ok2 || !ok3 || len(session) > 32 || len(suites) < 2 || len(suites)%2 != 0 || len(methods) < 1 {
		return "", errBadHello
	}
	if len(r) == 0 {
		return "", nil // no extensions, so no server name
	}
	exts, ok := r.vec16()
	if !ok || len(r) != 0 {
		return "", errBadHello
	}
	seen := map[uint16]bool{}
	name := ""
	for len(exts) > 0 {
		typ, ok1 := exts.u16()
		body, ok2 := exts.vec16()
		switch {
		case !ok1 || !ok2:
			return "", errBadHello
		case seen[typ]:
			return "", errRepeatExt
		}
		seen[typ] = true
		switch typ {
		case extECH, extESNI:
			return "", errHidden
		case extServerName:
		default:
			continue
		}
		list, ok := body.vec16()
		if !ok || len(body) != 0 || len(list) == 0 {
			return "", errBadHello
		}
		for len(list) > 0 {
			kind, ok1 := list.u8()
			host, ok2 := list.vec16()
			switch {
			case !ok1 || !ok2 || kind == 0 && len(host) == 0:
				return "", errBadHello
			case kind != 0: // not a host name
				continue
			case name != "":
				return "", errTwoNames
			}
			name = string(host)
		}
	}
	return name, nil
}

// reader consumes a byte slice from the front.
type reader []byte

func (r *reader) u8() (byte, bool) {
	if len(*r) < 1 {
		return 0, false
	}
	v := (*r)[0]
	*r = (*r)[1:]
	return v, true
}

func (r *reader) u16() (uint16, bool) {
	if len(*r) < 2 {
		return 0, false
	}
	v := binary.BigEndian.Uint16(*r)
	*r = (*r)[2:]
	return v, true
}

func (r *reader) u24() (int, bool) {
	if len(*r) < 3 {
		return 0, false
	}
	v := int((*r)[0])<<16 | int((*r)[1])<<8 | int((*r)[2])
	*r = (*r)[3:]
	return v, true
}

func (r *reader) skip(n int) bool {
	if len(*r) < n {
		return false
	}
	*r = (*r)[n:]
	return true
}

func (r *reader) vec8() (reader, bool) {
	n, ok := r.u8()
	if !ok || len(*r) < int(n) {
		return nil, false
	}
	v := (*r)[:n]
	*r = (*r)[n:]
	return v, true
}

func (r *reader) vec16() (reader, bool) {
	n, ok := r.u16()
	if !ok || len(*r) < int(n) {
		return nil, false
	}
	v := (*r)[:n]
	*r = (*r)[n:]
	return v, true
}
