package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// toolSchemas fetches GET /api/v1/tools with query and returns each tool's
// name and raw parameter schema, for the OpenAI formats.
func toolSchemas(t *testing.T, query string) (map[string]json.RawMessage, []map[string]json.RawMessage) {
	t.Helper()
	ts := newTestServer(t, newFakeEngine(), nil)
	code, _, body := call(t, ts, http.MethodGet, "/api/v1/tools"+query, "", nil, nil)
	if code != http.StatusOK {
		t.Fatalf("%s: %d %s", query, code, body)
	}
	list := decode[struct {
		Tools []map[string]json.RawMessage `json:"tools"`
	}](t, body)
	schemas := map[string]json.RawMessage{}
	for _, tool := range list.Tools {
		fn := tool
		if raw, ok := tool["function"]; ok { // Chat Completions nests the function
			fn = decode[map[string]json.RawMessage](t, raw)
		}
		schemas[decode[string](t, fn["name"])] = fn["parameters"]
	}
	return schemas, list.Tools
}

func TestToolsOpenAIResponses(t *testing.T) {
	for _, tt := range []struct {
		query  string
		strict bool
	}{{"?format=openai-responses", false}, {"?format=openai-responses&strict=true", true}} {
		t.Run(tt.query, func(t *testing.T) {
			_, tools := toolSchemas(t, tt.query)
			plain, _ := toolSchemas(t, "")
			for _, tool := range tools {
				name := decode[string](t, tool["name"])
				if decode[string](t, tool["type"]) != "function" || decode[string](t, tool["description"]) == "" {
					t.Errorf("%s: %v", name, tool)
				}
				// The Responses API assumes strict when the flag is absent,
				// so it is always sent.
				raw, ok := tool["strict"]
				if !ok || decode[bool](t, raw) != tt.strict {
					t.Errorf("%s: strict is %s, want %v", name, raw, tt.strict)
				}
				if _, nested := tool["function"]; nested {
					t.Errorf("%s: a Responses tool is flat, got a function object", name)
				}
				if !tt.strict && string(tool["parameters"]) != string(plain[name]) {
					t.Errorf("%s: parameters %s differ from the Chat Completions ones %s", name, tool["parameters"], plain[name])
				}
			}
			if len(tools) != len(plain) {
				t.Errorf("%d tools, want %d", len(tools), len(plain))
			}
		})
	}
}

func TestToolsStrict(t *testing.T) {
	plain, _ := toolSchemas(t, "?format=openai")
	strict, tools := toolSchemas(t, "?format=openai&strict=true")
	for _, tool := range tools {
		fn := decode[map[string]any](t, tool["function"])
		if fn["strict"] != true {
			t.Errorf("%v: no strict: true", fn["name"])
		}
	}
	if _, plainTools := toolSchemas(t, "?format=openai"); strings.Contains(string(plainTools[0]["function"]), `"strict"`) {
		t.Errorf("a non-strict Chat Completions tool carries strict: %s", plainTools[0]["function"])
	}
	for name, raw := range strict {
		t.Run(name, func(t *testing.T) {
			checkStrictObject(t, name, raw, plain[name])
		})
	}

	t.Run("run_python: optional arguments are nullable, code is not", func(t *testing.T) {
		s := decode[struct {
			Properties map[string]struct {
				Type any `json:"type"`
			} `json:"properties"`
		}](t, strict["run_python"])
		if s.Properties["code"].Type != "string" {
			t.Errorf("code type %v, want string", s.Properties["code"].Type)
		}
		for _, p := range []string{"timeout_seconds", "files", "session_id", "network"} {
			types, _ := s.Properties[p].Type.([]any)
			if !slices.Contains(types, any("null")) {
				t.Errorf("%s type %v, want it to accept null", p, s.Properties[p].Type)
			}
		}
	})

	t.Run("anthropic has no strict form: 400", func(t *testing.T) {
		ts := newTestServer(t, newFakeEngine(), nil)
		code, _, body := call(t, ts, http.MethodGet, "/api/v1/tools?format=anthropic&strict=true", "", nil, nil)
		if code != http.StatusBadRequest || !strings.Contains(decode[Error](t, body).Message, "strict") {
			t.Fatalf("%d %s", code, body)
		}
	})
}

// checkStrictObject checks one strict schema against its plain form: every
// object lists all its properties as required, in the plain order, and is
// closed; optional properties accept null; nothing else changed.
func checkStrictObject(t *testing.T, where string, strictRaw, plainRaw json.RawMessage) {
	t.Helper()
	s, err := decodeObject(strictRaw)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	p, err := decodeObject(plainRaw)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if raw, ok := s.get("items"); ok {
		plainItems, _ := p.get("items")
		checkStrictObject(t, where+".items", raw, plainItems)
	}
	if typ, _ := s.get("type"); !strings.Contains(string(typ), `"object"`) {
		return
	}
	if ap, _ := s.get("additionalProperties"); string(ap) != "false" {
		t.Errorf("%s: additionalProperties %s, want false", where, ap)
	}
	var props, plainProps *orderedObject = &orderedObject{}, &orderedObject{}
	if raw, ok := s.get("properties"); ok {
		props, _ = decodeObject(raw)
	}
	if raw, ok := p.get("properties"); ok {
		plainProps, _ = decodeObject(raw)
	}
	if !slices.Equal(props.keys, plainProps.keys) {
		t.Errorf("%s: properties %v, want %v in that order", where, props.keys, plainProps.keys)
	}
	var required, plainRequired []string
	if raw, ok := s.get("required"); !ok || json.Unmarshal(raw, &required) != nil {
		t.Errorf("%s: no required list", where)
	}
	if raw, ok := p.get("required"); ok {
		_ = json.Unmarshal(raw, &plainRequired)
	}
	if !slices.Equal(required, props.keys) {
		t.Errorf("%s: required %v, want every property %v", where, required, props.keys)
	}
	for _, name := range props.keys {
		sp, _ := decodeObject(props.values[name])
		pp, _ := decodeObject(plainProps.values[name])
		typ, _ := sp.get("type")
		plainTyp, _ := pp.get("type")
		nullable := strings.Contains(string(typ), `"null"`)
		if optional := !slices.Contains(plainRequired, name); optional != nullable {
			t.Errorf("%s.%s: type %s (optional: %v)", where, name, typ, optional)
		}
		if !strings.Contains(string(typ), string(plainTyp)) {
			t.Errorf("%s.%s: type %s lost %s", where, name, typ, plainTyp)
		}
		optional := !slices.Contains(plainRequired, name)
		for _, k := range pp.keys {
			if k == "enum" && optional {
				// An optional enum gains null, after the plain values.
				if want := strings.TrimSuffix(string(pp.values[k]), "]") + ",null]"; string(sp.values[k]) != want {
					t.Errorf("%s.%s: enum %s, want %s", where, name, sp.values[k], want)
				}
				continue
			}
			if k != "type" && k != "items" && k != "properties" && string(sp.values[k]) != string(pp.values[k]) {
				t.Errorf("%s.%s: %s changed from %s to %s", where, name, k, pp.values[k], sp.values[k])
			}
		}
		checkStrictObject(t, where+"."+name, props.values[name], plainProps.values[name])
	}
}

func TestStrictSchemaForms(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"optional string becomes nullable, required stays",
			`{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}},"required":["a"]}`,
			`{"type":"object","properties":{"b":{"type":["string","null"]},"a":{"type":"integer"}},"required":["b","a"],"additionalProperties":false}`},
		{"an enum gains null",
			`{"type":"object","properties":{"f":{"type":"string","enum":["png","svg"]}}}`,
			`{"type":"object","properties":{"f":{"type":["string","null"],"enum":["png","svg",null]}},"required":["f"],"additionalProperties":false}`},
		{"a schema without a type is wrapped in anyOf",
			`{"type":"object","properties":{"x":{"description":"anything"}}}`,
			`{"type":"object","properties":{"x":{"anyOf":[{"description":"anything"},{"type":"null"}]}},"required":["x"],"additionalProperties":false}`},
		{"objects in arrays and without properties are closed",
			`{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","properties":{"k":{"type":"string"}}}},"o":{"type":"object"}},"required":["l","o"]}`,
			`{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","properties":{"k":{"type":["string","null"]}},"required":["k"],"additionalProperties":false}},"o":{"type":"object","required":[],"additionalProperties":false}},"required":["l","o"],"additionalProperties":false}`},
		{"a type list keeps its members",
			`{"type":"object","properties":{"n":{"type":["integer","string"]}}}`,
			`{"type":"object","properties":{"n":{"type":["integer","string","null"]}},"required":["n"],"additionalProperties":false}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := strictSchema(json.RawMessage(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
	if _, err := strictSchema(json.RawMessage(`[1]`)); err == nil {
		t.Error("a schema that is not an object was accepted")
	}
}
