package run

import (
	"encoding/json"
	"unicode/utf8"
)

// BinaryString is a string of any bytes, such as a program's standard
// input. Its JSON form (a queued request) keeps every byte: a JSON string
// when it is UTF-8, as a plain string field would be written (and as
// earlier versions wrote Request.Stdin), {"base64": "…"} otherwise,
// where a plain string would have had its bytes replaced.
type BinaryString string

type base64Form struct {
	Base64 []byte `json:"base64"`
}

// MarshalJSON writes b as a string, or its base64 when it is not UTF-8.
func (b BinaryString) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(b)) {
		return json.Marshal(string(b))
	}
	return json.Marshal(base64Form{[]byte(b)})
}

// UnmarshalJSON reads either form MarshalJSON writes.
func (b *BinaryString) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '{' {
		var v base64Form
		if err := json.Unmarshal(data, &v); err != nil {
			return err
		}
		*b = BinaryString(v.Base64)
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	*b = BinaryString(s)
	return nil
}
