package mcpserver

import "encoding/json"

// jsonRoundTrip re-decodes v (as a client received it) into out; it
// returns the JSON for messages.
func jsonRoundTrip(v, out any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return raw, json.Unmarshal(raw, out)
}
