package egress

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"time"
)

// Limits bound what one execution may do through its egress.
type Limits struct {
	MaxConns       int           // connections open at once; more ends the execution
	BytesOut       int64         // total sent; more ends the execution
	BytesIn        int64         // total received; more ends the execution
	ConnectTimeout time.Duration // for each connection the egress opens
	MaxEvents      int           // events reported; later ones are only counted
}

// DefaultLimits are the limits of a server that sets none.
func DefaultLimits() Limits {
	return Limits{MaxConns: 64, BytesOut: 256 << 20, BytesIn: 1 << 30, ConnectTimeout: 10 * time.Second, MaxEvents: 1000}
}

// WithDefaults fills zero fields from DefaultLimits.
func (l Limits) WithDefaults() Limits {
	d := DefaultLimits()
	if l.MaxConns <= 0 {
		l.MaxConns = d.MaxConns
	}
	if l.BytesOut <= 0 {
		l.BytesOut = d.BytesOut
	}
	if l.BytesIn <= 0 {
		l.BytesIn = d.BytesIn
	}
	if l.ConnectTimeout <= 0 {
		l.ConnectTimeout = d.ConnectTimeout
	}
	if l.MaxEvents <= 0 {
		l.MaxEvents = d.MaxEvents
	}
	return l
}

// Resolver answers the names the jail asks for; *net.Resolver implements
// it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// StaticResolver answers from a fixed map and knows no other name. It
// stands in for DNS in tests and for an operator who pins names.
type StaticResolver map[string][]netip.Addr

var _ Resolver = StaticResolver(nil)

// ErrNoSuchHost is what StaticResolver answers for a name it lacks.
var ErrNoSuchHost = errors.New("no such host")

// LookupNetIP returns the addresses of host.
func (s StaticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	a, ok := s[strings.TrimSuffix(strings.ToLower(host), ".")]
	if !ok {
		return nil, ErrNoSuchHost
	}
	return a, nil
}

// ParseHosts parses "name=addr[,addr...]" entries into a StaticResolver.
func ParseHosts(entries []string) (StaticResolver, error) {
	out := StaticResolver{}
	for _, e := range entries {
		name, list, ok := strings.Cut(e, "=")
		name = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(name)), ".")
		if !ok || checkName(name) != nil {
			return nil, errors.New("host entry " + e + " is not name=address[,address]")
		}
		for _, s := range strings.Split(list, ",") {
			a, err := netip.ParseAddr(strings.TrimSpace(s))
			if err != nil {
				return nil, errors.New("host entry " + e + ": " + err.Error())
			}
			out[name] = append(out[name], a.Unmap())
		}
	}
	return out, nil
}

// Event is one connection attempt or name lookup of a payload, as its
// execution's stream, record and the audit trail show it.
type Event struct {
	Proto    string `json:"proto"`          // "tcp", "udp", "dns" or "http"
	Host     string `json:"host"`           // the name asked for, or the address
	Addr     string `json:"addr,omitempty"` // the address dialled
	Port     uint16 `json:"port,omitempty"`
	Verdict  string `json:"verdict"` // VerdictAllow, VerdictDeny or VerdictError
	Reason   string `json:"reason,omitempty"`
	BytesOut int64  `json:"bytes_out,omitempty"` // payload → destination
	BytesIn  int64  `json:"bytes_in,omitempty"`  // destination → payload
	// Secret names the secret an "http" or "dns" event is about: injected
	// (verdict allow), or its placeholder found where it is never
	// replaced (deny). Never its value.
	Secret string `json:"secret,omitempty"`
	// Method and Path (without the query) are those of the request an
	// "http" event is about, Status the destination's answer (0: none).
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	Status int    `json:"status,omitempty"`
}

// Verdicts of an Event.
const (
	VerdictAllow = "allow" // resolved, or connected and relayed
	VerdictDeny  = "deny"  // refused by policy, the guard or a limit
	VerdictError = "error" // allowed, but the destination failed
)

// Reasons of an Event besides the guard's.
const (
	ReasonNotAllowed      = "not_allowed"           // not on the allow list, or on the deny list
	ReasonPrivateAddress  = "private_address"       // an allowed name resolved only to denied addresses (rebinding)
	ReasonUnknownAddress  = "unknown_address"       // an address the jail's DNS never handed out
	ReasonSNIMismatch     = "sni_mismatch"          // TLS server name differs from the name connected to
	ReasonHostMismatch    = "host_mismatch"         // HTTP Host missing, or differs from the name connected to
	ReasonBadClientHello  = "bad_client_hello"      // TLS that cannot be checked
	ReasonBadHTTPRequest  = "bad_http_request"      // HTTP that cannot be checked (not strict HTTP/1.x, ambiguous framing, HTTP/2, Upgrade, CONNECT)
	ReasonUnrecognised    = "unrecognised_protocol" // neither TLS nor HTTP on a connection only a name rule allows
	ReasonDNSFlowLimit    = "dns_flow_limit"        // a lookup while maxDNSFlows others were being answered
	ReasonUDP             = "udp_not_allowed"       // UDP other than DNS
	ReasonResolveFailed   = "resolve_failed"        // the name did not resolve
	ReasonConnectFailed   = "connect_failed"        // the destination did not answer
	ReasonConnectionLimit = "connection_limit"      // Limits.MaxConns
	ReasonBytesOutLimit   = "bytes_out_limit"       // Limits.BytesOut
	ReasonBytesInLimit    = "bytes_in_limit"        // Limits.BytesIn
	ReasonClosed          = "execution_ended"       // the execution ended first

	// Of connections whose TLS the egress terminates (intercept_linux.go).
	ReasonHTTPRule         = "http_rule"              // the operator's HTTP rules refuse the method or path (403)
	ReasonDestinationTLS   = "destination_tls_failed" // the destination's certificate did not verify, or its handshake failed
	ReasonPayloadTLS       = "payload_tls_failed"     // the payload did not complete TLS with the egress (does it trust the server's CA?)
	ReasonEncodedResponse  = "encoded_response"       // a response to a secret's destination in a content coding the egress cannot redact (502)
	ReasonBadHTTPResponse  = "bad_http_response"      // a response the egress cannot read strictly (502)
	ReasonPartialResponse  = "partial_response"       // a part of a resource (206, multipart/byteranges) from a secret's destination (502)
	ReasonOverrideHeader   = "override_header"        // a method or URL override (X-HTTP-Method-Override, X-Original-URL, _method, …) to a destination with a secret or HTTP rule (403)
	ReasonFormContent      = "form_content"           // form content (or content without a Content-Type) to a destination with a secret or HTTP rule that the egress cannot check for _method: over 64 KiB (413), compressed or unreadable (400)
	ReasonNoTermination    = "tls_not_terminated"     // TLS to a destination with a secret or HTTP rule, and no CA to terminate it with
	ReasonRuledAddress     = "ruled_address"          // an address literal of a destination with a secret or HTTP rule, which is reached by name only
	ReasonTerminationLimit = "termination_limit"      // TLS to a 65th name whose TLS the egress would terminate for one execution

	// A placeholder found where it is never replaced by its value.
	ReasonPlaceholderOtherHost = "placeholder_other_host" // in the secret's header, to a destination not among its hosts
	ReasonPlaceholderPlainHTTP = "placeholder_plain_http" // in the secret's header, to its host without TLS
	ReasonPlaceholderInHeader  = "placeholder_in_header"  // in another header, or not as the template writes it
	ReasonPlaceholderInURL     = "placeholder_in_url"     // in a request target
	ReasonPlaceholderInBody    = "placeholder_in_body"    // in a request's content
	ReasonPlaceholderInDNS     = "placeholder_in_dns"     // in a name looked up
)

// Config is what every execution's egress shares: the operator's policy,
// the guard, the resolver, the limits, and what it needs to terminate TLS.
type Config struct {
	Policy   Policy
	Guard    *Guard
	Resolver Resolver // nil: the system's
	Limits   Limits
	// HTTPRules are the operator's HTTP rules. They hold whether or not
	// Intercept is set: a destination they cover is always served by the
	// egress's HTTP proxy (plain HTTP), and its TLS is terminated with
	// Intercept or refused (tls_not_terminated), never relayed unchecked.
	HTTPRules []HTTPRule
	// Intercept, when set, lets the egress terminate TLS to the
	// destinations of an execution's secrets and of the HTTP rules
	// (intercept_linux.go); nil: such TLS is refused.
	Intercept *Interception
}

// Hooks tell the owner of an Egress what happens. Both may be nil.
type Hooks struct {
	// Event receives every event, in the order they complete.
	Event func(Event)
	// Limit is called once, with the reason, when the execution went over
	// one of its limits; the egress has already cut every connection.
	Limit func(reason string)
}

// Stats are an execution's totals.
type Stats struct {
	BytesOut, BytesIn int64
	Events, Dropped   int64
	// LimitReason is the limit that ended the execution, "" if none.
	LimitReason string
}
