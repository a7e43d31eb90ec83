// Package http1 reads HTTP/1.x requests as a strict server does (RFC
// 9112): a request head whole, then its content by the framing the head
// declares, so that a reader in the middle of a connection (the egress)
// sees each request exactly where the destination will and can check it
// before passing it on.
//
// It accepts a narrow subset of what RFC 9112 allows and refuses the rest,
// so that whatever it accepts every conforming server, and the common
// lenient ones, read the same way: CRLF line endings only; a request line
// of a method token, one space, a target of visible ASCII, one space and
// HTTP/1.0 or HTTP/1.1; field names that are tokens followed at once by a
// colon; field values of visible ASCII, spaces and tabs (no line folding,
// no control or non-ASCII bytes, which some servers take for line
// breaks); at most one Host, which HTTP/1.1 requires; at most one framing
// field — Content-Length digits, or Transfer-Encoding "chunked" on
// HTTP/1.1 — never both; chunk sizes in hex digits without extensions; no
// trailer fields.
//
// It never writes to the network and never changes a request: ReadHead
// hands over the head exactly as sent, CopyBody the content as sent with
// each chunk-size line written again in canonical form (lower-case hex,
// no leading zeros), so that no reader after it can count other digits.
package http1
