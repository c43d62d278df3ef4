package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

type ctxKey int

const (
	keyCorrelation ctxKey = iota
	keyPrincipal
	keyVersion
	keyLegacy
	keyBody
)

func correlationID(ctx context.Context) string {
	id, _ := ctx.Value(keyCorrelation).(string)
	return id
}

// isLegacy tells whether the request came through the legacy surface, whose
// bodies are camelCase and whose errors have the legacy shape.
func isLegacy(ctx context.Context) bool {
	l, _ := ctx.Value(keyLegacy).(bool)
	return l
}

// writeJSON encodes v with the given status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if v == nil {
		return
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// writeError renders err in the format of the request's surface.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := asError(r.Context(), s.logger, err)
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	if isLegacy(r.Context()) {
		writeJSON(w, e.Status, legacyError{Message: e.Message, Category: e.Category, DocURL: docBase + e.Code})
		return
	}
	writeJSON(w, e.Status, bankingError{
		Category: e.Category, Code: e.Code, Message: e.Message, Param: e.Param,
		DocURL: docBase + e.Code, CorrelationID: correlationID(r.Context()), RequiredScopes: e.RequiredScopes,
	})
}

// requestBody returns the body that the body middleware read (bounded).
func requestBody(r *http.Request) []byte {
	b, _ := r.Context().Value(keyBody).([]byte)
	return b
}

// decodeJSON decodes the request body strictly into v: malformed JSON is a
// 400, and an unknown field is a 400 naming it.
func decodeJSON(r *http.Request, v any) error {
	body := requestBody(r)
	if len(bytes.TrimSpace(body)) == 0 {
		return errValidation("", "The request body must be a JSON object.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errValidation("", "The request body must hold a single JSON object.")
	}
	return nil
}

func jsonError(err error) *Error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return errValidation("", "The request body must be a JSON object.")
		}
		return errInvalid(field, fmt.Sprintf("%s must be of type %s.", field, jsonType(typeErr.Type.Kind().String())))
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return errValidation("", "The request body is not valid JSON.")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return errValidation(name, fmt.Sprintf("Unknown field %q.", name))
	default:
		return errValidation("", "The request body is not valid JSON.")
	}
}

func jsonType(kind string) string {
	switch kind {
	case "slice", "array":
		return "array"
	case "map", "struct":
		return "object"
	case "int", "int64", "int32", "float64", "uint", "uint64":
		return "number"
	case "bool":
		return "boolean"
	default:
		return kind
	}
}
