package run

import (
	"encoding/json"
	"testing"
)

// TestQueuedStdinKeepsEveryByte: a queued request travels as JSON; its
// stdin comes back byte for byte, text or not, and a request written by
// an earlier version (stdin as a plain string) still reads.
func TestQueuedStdinKeepsEveryByte(t *testing.T) {
	for _, stdin := range []BinaryString{"", "text\n", "h\u00e9llo", "\xff\x00\xfe binary \x80", "{\"base64\":1}"} {
		b, err := json.Marshal(Request{Stdin: stdin})
		if err != nil {
			t.Fatal(err)
		}
		var back Request
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.Stdin != stdin {
			t.Errorf("stdin %q came back as %q (JSON %s)", stdin, back.Stdin, b)
		}
	}
	var old Request
	if err := json.Unmarshal([]byte(`{"files":null,"entrypoint":"main.py","stdin":"from v1\n"}`), &old); err != nil || old.Stdin != "from v1\n" {
		t.Errorf("a request of an earlier version: %v %q", err, old.Stdin)
	}
}
