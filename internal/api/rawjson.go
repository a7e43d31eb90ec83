package api

import (
	"reflect"
	"slices"

	"github.com/danielgtaylor/huma/v2"
)

// The eval and lint bodies are read raw (a RawBody) and decoded by
// decodeJSON, which ignores unknown fields and words its 400s itself. huma
// publishes any RawBody as a binary string, so after registration the
// operation's body is given back the schema of what is decoded.

// publishJSONBody documents the JSON body of the POST operation registered
// at path as typ, named name among the components, which holds
// "code" or "files" (at least one of them non-empty).
func publishJSONBody(hapi huma.API, path string, typ reflect.Type, name string) {
	reg := hapi.OpenAPI().Components.Schemas
	ref := reg.Schema(typ, true, name)
	if s := reg.Map()[name]; s != nil {
		one := 1
		s.AnyOf = []*huma.Schema{
			{Required: []string{"code"}, Properties: map[string]*huma.Schema{"code": {Type: huma.TypeString, MinLength: &one}}},
			{Required: []string{"files"}, Properties: map[string]*huma.Schema{"files": {Type: huma.TypeArray, MinItems: &one}}},
		}
		s.Description = "Either code or files is required (a non-empty one); when files are given, code is ignored. Unknown fields are ignored."
	}
	hapi.OpenAPI().Paths[path].Post.RequestBody = &huma.RequestBody{
		Required: true,
		Content:  map[string]*huma.MediaType{"application/json": {Schema: ref}},
	}
}

// looseBodies makes the published schemas of request bodies admit what
// their decoders admit. encoding/json (which decodes the raw eval, lint and
// multipart metadata bodies) and huma's validation (for the other bodies)
// both take null as "absent" for a field that may be left out; in the raw
// bodies every field is decoded that way, required ones too (an empty name
// is then refused by the handler, with a 400), and unknown fields, at any
// depth, are ignored.
func looseBodies(reg huma.Registry) {
	raw := map[string]bool{"EvalRequest": true, "LintRequest": true, "EvalFile": true, "Metadata": true, "ExecConfig": true}
	for _, name := range []string{"EvalRequest", "LintRequest", "EvalFile", "Metadata", "ExecConfig", "SessionRequest", "CellRequest"} {
		s := reg.Map()[name]
		if s == nil {
			continue
		}
		if raw[name] {
			s.AdditionalProperties = true
		}
		for prop, ps := range s.Properties {
			if raw[name] || !slices.Contains(s.Required, prop) {
				s.Properties[prop] = orNull(ps)
			}
		}
	}
}

// orNull is schema s that also admits null.
func orNull(s *huma.Schema) *huma.Schema {
	var n *huma.Schema
	switch {
	case s.Nullable:
		return s
	case s.Ref != "" || s.Type == "" || len(s.OneOf) > 0 || len(s.AnyOf) > 0:
		n = &huma.Schema{AnyOf: []*huma.Schema{s, {Type: "null"}}, Description: s.Description}
	default:
		c := *s
		c.Nullable = true
		if len(c.Enum) > 0 {
			c.Enum = append(slices.Clone(c.Enum), nil)
		}
		n = &c
	}
	n.PrecomputeMessages()
	return n
}
