package mcpserver

import (
	"bytes"
	"mime"
	"strings"
	"unicode/utf8"
)

// fileKind is how read_file returns a file of some media type.
type fileKind int

const (
	// kindBinary files come back as an embedded base64 resource, unless
	// their bytes turn out to be text.
	kindBinary fileKind = iota
	// kindText files come back as text, a window at a time.
	kindText
	// kindImage files come back as MCP image content.
	kindImage
)

// limit is the largest file of the kind that read_file returns whole; 0
// for text, which is returned a window at a time.
func (k fileKind) limit() int64 {
	switch k {
	case kindImage:
		return maxImageBytes
	case kindBinary:
		return maxBlobBytes
	}
	return 0
}

// imageTypes are the images MCP clients show (SVG is text to a model).
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// kindOf classifies a media type such as "text/csv; charset=utf-8".
func kindOf(mimeType string) fileKind {
	t := baseMIME(mimeType)
	switch {
	case imageTypes[t]:
		return kindImage
	case strings.HasPrefix(t, "text/"), strings.HasSuffix(t, "+json"), strings.HasSuffix(t, "+xml"):
		return kindText
	}
	switch t {
	case "application/json", "application/xml", "application/javascript", "application/x-yaml",
		"application/yaml", "application/toml", "application/x-sh", "application/sql":
		return kindText
	}
	return kindBinary
}

// baseMIME is the media type without its parameters, lower case.
func baseMIME(mimeType string) string {
	t, _, err := mime.ParseMediaType(mimeType)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(mimeType))
	}
	return t
}

// looksLikeText reports whether data is UTF-8 without NUL bytes, allowing
// a sequence cut at its end.
func looksLikeText(data []byte) bool {
	return bytes.IndexByte(data, 0) < 0 && utf8.Valid(trimToRune(data))
}

// trimToRune drops a UTF-8 sequence cut at the end of data.
func trimToRune(data []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(data); i++ {
		if utf8.RuneStart(data[len(data)-i]) {
			if !utf8.FullRune(data[len(data)-i:]) {
				return data[:len(data)-i]
			}
			break
		}
	}
	return data
}
