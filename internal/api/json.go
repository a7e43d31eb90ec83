package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
)

// decodeJSON decodes a client's JSON object into v with messages that name
// the offending field in the client's terms, never Go's. Unknown fields are
// ignored, as python-executor did. what names the document ("request
// body", "metadata"). Every message starts "invalid JSON", the words
// python-executor's clients and tests look for.
func decodeJSON(data []byte, v any, what string) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return errorf(http.StatusBadRequest, "invalid JSON: %s is empty; expected a JSON object", what)
	}
	err := json.Unmarshal(data, v)
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return errorf(http.StatusBadRequest, "invalid JSON in %s: field %q must be %s, got %s", what, typeErr.Field, jsonKind(typeErr.Type), typeErr.Value)
	case errors.As(err, &typeErr):
		return errorf(http.StatusBadRequest, "invalid JSON in %s: expected a JSON object, got %s", what, typeErr.Value)
	case errors.As(err, &syntaxErr):
		return errorf(http.StatusBadRequest, "invalid JSON in %s: malformed at byte %d: %v", what, syntaxErr.Offset, syntaxErr)
	}
	return errorf(http.StatusBadRequest, "invalid JSON in %s: %v", what, err)
}

// jsonKind names the JSON type that decodes into t.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "an object"
}
