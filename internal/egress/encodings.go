package egress

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// encodings are the forms a destination that reflects a secret's value is
// likely to send it back in, the value itself first: as a JSON string (the
// escapes of the common encoders: \" or \u0022, \\, \/ or /, and \uXXXX
// for some or all punctuation, in either hex case), percent-encoded (as
// the common URL encoders leave or encode its reserved characters, in
// either hex case, a space as %20 or '+'), with HTML character
// references, in hex, and in base64 (standard and URL alphabets, at each
// of the three alignments the value can have in an encoded text: the
// whole groups of three bytes that hold only the value's bytes). The redaction replaces each of them
// (redact.go): a payload that decodes an echo gets no value. Forms of a
// value that an encoder leaves as it is are the value and are not listed
// twice.
func encodings(v string) []string {
	forms := []string{v}
	add := func(f string) {
		if len(f) > 0 && !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	for _, quoteU := range []bool{false, true} {
		for _, slash := range []bool{false, true} {
			for _, uset := range []string{"", "<>&", "<>&'", "+<>&'`", "all"} {
				for _, hexf := range []string{"%04x", "%04X"} {
					add(jsonForm(v, quoteU, slash, uset, hexf))
				}
			}
		}
	}
	for _, keep := range []string{"", "/", "!'()*", ":@!$&'()*+,;=/"} {
		for _, hexf := range []string{"%%%02X", "%%%02x"} {
			f := percentForm(v, keep, hexf)
			add(f)
			// A form encoder writes an inner space as '+'.
			add(strings.ReplaceAll(f, fmt.Sprintf(hexf, ' '), "+"))
		}
	}
	for _, refs := range []map[byte]string{
		{'"': "&#34;", '\'': "&#39;", '<': "&lt;", '>': "&gt;", '&': "&amp;"},
		{'"': "&quot;", '\'': "&#x27;", '<': "&lt;", '>': "&gt;", '&': "&amp;"},
		{'"': "&quot;", '\'': "&#039;", '<': "&lt;", '>': "&gt;", '&': "&amp;"},
		{'"': "&quot;", '\'': "&apos;", '<': "&lt;", '>': "&gt;", '&': "&amp;"},
	} {
		add(mapForm(v, func(c byte) string { return refs[c] }))
	}
	add(hex.EncodeToString([]byte(v)))
	add(strings.ToUpper(hex.EncodeToString([]byte(v))))
	for k := range 3 {
		rest := v[min(k, len(v)):]
		rest = rest[:len(rest)/3*3]
		// Fewer than four groups would be too short to tell from
		// anything else.
		if len(rest) >= 12 {
			add(base64.StdEncoding.EncodeToString([]byte(rest)))
			add(base64.URLEncoding.EncodeToString([]byte(rest)))
		}
	}
	return forms
}

// jsonForm is v as a JSON string's content: " as \" (or \u0022 when
// quoteU), \ as \\, / as \/ when slash, and the characters of uset ("all":
// every character but letters and digits) as \u with hexf.
func jsonForm(v string, quoteU, slash bool, uset, hexf string) string {
	return mapForm(v, func(c byte) string {
		alnum := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
		switch {
		case uset == "all" && !alnum, strings.IndexByte(uset, c) >= 0, c == '"' && quoteU:
			return `\u` + fmt.Sprintf(hexf, c)
		case c == '"':
			return `\"`
		case c == '\\':
			return `\\`
		case c == '/' && slash:
			return `\/`
		}
		return ""
	})
}

// percentForm is v percent-encoded with hexf: every byte but letters,
// digits, "-._~" and those of keep.
func percentForm(v, keep, hexf string) string {
	return mapForm(v, func(c byte) string {
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("-._~"+keep, c) >= 0 {
			return ""
		}
		return fmt.Sprintf(hexf, c)
	})
}

// mapForm is v with each byte for which to gives a text replaced by it.
func mapForm(v string, to func(byte) string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if r := to(v[i]); r != "" {
			b.WriteString(r)
		} else {
			b.WriteByte(v[i])
		}
	}
	return b.String()
}
