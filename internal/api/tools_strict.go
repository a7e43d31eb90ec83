package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// strictSchema rewrites a tool's JSON Schema into the form OpenAI's strict
// mode accepts: at every object level all properties are required and
// additionalProperties is false; a property that was optional accepts null
// as well, which a caller reads as "not given". Property order is kept, since
// a model writes the arguments in the order the schema lists them.
func strictSchema(raw json.RawMessage) (json.RawMessage, error) {
	s, err := decodeObject(raw)
	if err != nil {
		return nil, fmt.Errorf("strict schema: %w", err)
	}
	if err := strictObject(s); err != nil {
		return nil, fmt.Errorf("strict schema: %w", err)
	}
	return s.MarshalJSON()
}

// strictObject makes one schema strict, then the schemas under its
// properties and items.
func strictObject(s *orderedObject) error {
	if raw, ok := s.get("items"); ok {
		items, err := decodeObject(raw)
		if err != nil {
			return fmt.Errorf("items: %w", err)
		}
		if err := strictObject(items); err != nil {
			return err
		}
		if err := s.setJSON("items", items); err != nil {
			return err
		}
	}
	raw, ok := s.get("properties")
	if !ok {
		if typ, _ := s.get("type"); string(typ) == `"object"` {
			// An object without properties: strict mode wants it closed
			// and its (empty) list of required ones stated.
			return s.closeObject(nil)
		}
		return nil
	}
	props, err := decodeObject(raw)
	if err != nil {
		return fmt.Errorf("properties: %w", err)
	}
	var required []string
	if r, ok := s.get("required"); ok {
		if err := json.Unmarshal(r, &required); err != nil {
			return fmt.Errorf("required: %w", err)
		}
	}
	for _, name := range props.keys {
		p, err := decodeObject(props.values[name])
		if err != nil {
			return fmt.Errorf("property %s: %w", name, err)
		}
		if err := strictObject(p); err != nil {
			return fmt.Errorf("property %s: %w", name, err)
		}
		if !slices.Contains(required, name) {
			if err := nullable(p); err != nil {
				return fmt.Errorf("property %s: %w", name, err)
			}
		}
		if err := props.setJSON(name, p); err != nil {
			return err
		}
	}
	if err := s.setJSON("properties", props); err != nil {
		return err
	}
	return s.closeObject(props.keys)
}

// nullable lets a schema accept null too: "type" becomes a list with
// "null" (and an enum gains null); a schema without a type is wrapped in
// anyOf with a null schema.
func nullable(s *orderedObject) error {
	typ, ok := s.get("type")
	if !ok {
		inner, err := s.MarshalJSON()
		if err != nil {
			return err
		}
		*s = orderedObject{values: map[string]json.RawMessage{}}
		return s.setJSON("anyOf", []json.RawMessage{inner, json.RawMessage(`{"type":"null"}`)})
	}
	var types []string
	var one string
	if json.Unmarshal(typ, &one) == nil {
		types = []string{one}
	} else if err := json.Unmarshal(typ, &types); err != nil {
		return fmt.Errorf("type: %w", err)
	}
	if !slices.Contains(types, "null") {
		types = append(types, "null")
	}
	if err := s.setJSON("type", types); err != nil {
		return err
	}
	if raw, ok := s.get("enum"); ok {
		var enum []json.RawMessage
		if err := json.Unmarshal(raw, &enum); err != nil {
			return fmt.Errorf("enum: %w", err)
		}
		if !slices.ContainsFunc(enum, func(v json.RawMessage) bool { return string(v) == "null" }) {
			enum = append(enum, json.RawMessage("null"))
		}
		return s.setJSON("enum", enum)
	}
	return nil
}

// closeObject sets required to names (all the properties) and
// additionalProperties to false.
func (o *orderedObject) closeObject(names []string) error {
	if names == nil {
		names = []string{}
	}
	if err := o.setJSON("required", names); err != nil {
		return err
	}
	return o.setJSON("additionalProperties", false)
}

// orderedObject is a JSON object that keeps the order of its keys.
type orderedObject struct {
	keys   []string
	values map[string]json.RawMessage
}

func decodeObject(raw json.RawMessage) (*orderedObject, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object: %s", raw)
	}
	o := &orderedObject{values: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string) // object keys are always strings
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if _, dup := o.values[key]; !dup {
			o.keys = append(o.keys, key)
		}
		o.values[key] = v
	}
	return o, nil
}

func (o *orderedObject) get(key string) (json.RawMessage, bool) {
	v, ok := o.values[key]
	return v, ok
}

// setJSON sets key to the JSON of v, appending the key when it is new.
func (o *orderedObject) setJSON(key string, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, ok := o.values[key]; !ok {
		o.keys = append(o.keys, key)
	}
	o.values[key] = raw
	return nil
}

// MarshalJSON writes the object with its keys in order.
func (o *orderedObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		key, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b.Write(key)
		b.WriteByte(':')
		b.Write(o.values[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
