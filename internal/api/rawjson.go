package api

import (
	"reflect"

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
			{Required: []string{"code"}, Properties: map[string]*huma.Schema{"code": {MinLength: &one}}},
			{Required: []string{"files"}, Properties: map[string]*huma.Schema{"files": {MinItems: &one}}},
		}
		s.AdditionalProperties = true // decodeJSON ignores unknown fields
		s.Description = "Either code or files is required (a non-empty one); when files are given, code is ignored. Unknown fields are ignored."
	}
	hapi.OpenAPI().Paths[path].Post.RequestBody = &huma.RequestBody{
		Required: true,
		Content:  map[string]*huma.MediaType{"application/json": {Schema: ref}},
	}
}
