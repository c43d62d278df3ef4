package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/webhookd/webhookd/internal/invalid"
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

// responder renders every answer's error in the format of the request's
// surface: one value, shared by the middleware and every handler group, so
// that the error format is written once.
type responder struct {
	// logger receives the detail of every internal error (never sent).
	logger *slog.Logger
}

// handlerFunc is a handler that returns its error for the responder to
// render, rather than writing it itself.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// statusClientClosed is the status a request is counted and logged with
// when its client went away before the answer (nginx's 499, "client
// closed request"): no status was sent, and nothing failed on the
// engine's side, so it is neither a 500 nor an error in the log.
const statusClientClosed = 499

// clientGone tells whether err is the request's own context cancelled
// because its client closed the connection (a long poll or a listen
// given up, a request abandoned midway).
func clientGone(r *http.Request, err error) bool {
	return errors.Is(err, context.Canceled) && errors.Is(r.Context().Err(), context.Canceled)
}

// writeError renders err in the format of the request's surface; a
// request whose client went away is only noted as statusClientClosed.
func (rs responder) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if clientGone(r, err) {
		w.WriteHeader(statusClientClosed)
		return
	}
	e := asError(r.Context(), rs.logger, err)
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

// handle adapts a handlerFunc: a non-nil error is rendered by writeError,
// in the format of the request's surface.
func (rs responder) handle(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			rs.writeError(w, r, err)
		}
	}
}

// fail is a handler that always answers err.
func (rs responder) fail(err *Error) http.HandlerFunc {
	return rs.handle(func(http.ResponseWriter, *http.Request) error { return err })
}

// requestBody returns the body that the body middleware read (bounded).
func requestBody(r *http.Request) []byte {
	b, _ := r.Context().Value(keyBody).([]byte)
	return b
}

// decodeJSON decodes the request body strictly into v (see decodeBody).
// A Content-Type other than application/json is refused (spec 4.2 names
// it); an absent one is taken to mean JSON.
func decodeJSON(r *http.Request, v any) error {
	if err := checkJSONContentType(r); err != nil {
		return err
	}
	return decodeBody(requestBody(r), v)
}

// checkJSONContentType refuses a body sent as anything but JSON; a
// request without a Content-Type is read as JSON.
func checkJSONContentType(r *http.Request) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return errInvalid("Content-Type", "Content-Type must be application/json.")
		}
	}
	return nil
}

// decodeNoFields reads the body of an action that takes no fields: it may
// be absent; when sent it must be an empty object.
func decodeNoFields(r *http.Request) error {
	if len(requestBody(r)) == 0 {
		return nil
	}
	var none struct{}
	return decodeJSON(r, &none)
}

// decodeBody decodes body strictly into v, a pointer to a struct: the body
// must be one UTF-8 JSON object whose keys are v's json names exactly
// (encoding/json alone would take "URL" for "url" and replace invalid UTF-8
// silently). No key or string anywhere in it, however deep (a payload's
// too), may hold what a Postgres text or jsonb value cannot: the NUL
// character, or text that is not UTF-8 (a lone surrogate escape included;
// see textError). A refusal is a 400 naming the field at fault when there
// is one.
func decodeBody(body []byte, v any) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return errValidation("", "The request body must be a JSON object.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && exactKeys(body, reflect.TypeOf(v)) {
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return errValidation("", "The request body must hold a single JSON object.")
		}
		// Checked once the body decoded, so that a field that is unknown
		// or of the wrong type is named as such first.
		if f := invalid.FindText(body); f != nil {
			return textError(f, reflect.TypeOf(v))
		}
		return nil
	}
	// Refused: the slow path decodes field by field to name the one at
	// fault. Only refusals pay for it; ingest is a hot path.
	if json.Valid(body) {
		if ferr := checkFields(body, reflect.TypeOf(v), ""); ferr != nil {
			return ferr
		}
	}
	if err != nil {
		return jsonError(err)
	}
	return errValidation("", "The request body's field names must be exactly as documented.")
}

// exactKeys reports whether every key of the object body, and of the
// objects in its lists of structs, is exactly the json name of a field of
// t: encoding/json matches names without regard to case ("URL" for "url").
// One pass of a token reader, values skipped whole.
func exactKeys(body []byte, t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return true // a map takes any key
	}
	return objectKeysExact(json.NewDecoder(bytes.NewReader(body)), t)
}

func objectKeysExact(dec *json.Decoder, t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	for dec.More() {
		tok, err := dec.Token()
		key, ok := tok.(string)
		if err != nil || !ok {
			return false
		}
		ft, ok := jsonField(t, key)
		if !ok {
			return false
		}
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			if !listKeysExact(dec, ft.Elem()) {
				return false
			}
			continue
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return false
		}
		if nested := plainStruct(ft); nested != nil && string(skip) != "null" &&
			!objectKeysExact(json.NewDecoder(bytes.NewReader(skip)), nested) {
			return false
		}
	}
	_, err := dec.Token() // the closing brace
	return err == nil
}

// listKeysExact is objectKeysExact for each object of a list (or null).
func listKeysExact(dec *json.Decoder, t reflect.Type) bool {
	tok, err := dec.Token()
	if err != nil || tok == nil {
		return err == nil
	}
	if tok != json.Delim('[') {
		return false
	}
	for dec.More() {
		if !objectKeysExact(dec, t) {
			return false
		}
	}
	_, err = dec.Token() // the closing bracket
	return err == nil
}

// jsonField is the type of t's field whose json name is exactly name.
func jsonField(t reflect.Type, name string) (reflect.Type, bool) {
	if t.Kind() != reflect.Struct {
		return nil, false
	}
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); tag == name {
			return t.Field(i).Type, true
		}
	}
	return nil, false
}

// textError is the refusal of a body holding text Postgres cannot store:
// 400 parameter_invalid naming the field at fault as deep as it goes
// (payload.customer.name, events[1].payload.items[0], metadata[key],
// headers.X-Name: see fieldPath). A bad key names the object that holds
// it, the key itself being the fault; a top-level key, which no field is
// named (decodeBody checks text once the keys matched), would be an
// unknown field, shown with the fault replaced by U+FFFD.
func textError(f *invalid.TextFault, t reflect.Type) *Error {
	if f.InKey && len(f.Path) == 0 {
		name := strings.ReplaceAll(f.Key, "\x00", "\uFFFD")
		return errValidation(name, fmt.Sprintf("Unknown field %q.", name))
	}
	bad := f.Refusal(fieldPath(t, f.Path))
	return errInvalid(bad.Param, bad.Message)
}

// fieldPath names the value at path (keys and indexes, as FindText gives
// them) of a body decoded into t, as the rules of the fields name their
// parts: a struct's field by its json name, a map's entry as [key]
// (metadata[key]), a list's element as [i], and below a field that
// decodes itself (a payload, the headers) a member as .key.
func fieldPath(t reflect.Type, path []any) string {
	var b strings.Builder
	for _, step := range path {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch s := step.(type) {
		case int:
			b.WriteString("[" + strconv.Itoa(s) + "]")
			if t != nil && t.Kind() == reflect.Slice && !decodesItself(t) {
				t = t.Elem()
			} else {
				t = nil
			}
		case string:
			if t != nil && t.Kind() == reflect.Map && !decodesItself(t) {
				b.WriteString("[" + s + "]")
				t = t.Elem()
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
			if t != nil && plainStruct(t) != nil {
				t, _ = jsonField(plainStruct(t), s) // nil when no field is so named
			} else {
				t = nil
			}
		}
	}
	return b.String()
}

// decodesItself tells whether t has an UnmarshalJSON of its own (a
// json.RawMessage, optionalHeaders…), whose parts fieldPath names as JSON.
func decodesItself(t reflect.Type) bool {
	return reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]())
}

// checkFields decodes each field of the object body into its field of t
// (a struct, or a pointer to one) on its own, so that a refusal names the
// field at fault: a key that is not exactly a json name of t, or a value of
// the wrong type or form (encoding/json names neither the field of a value
// that a type's own UnmarshalJSON refuses, such as a time, nor the index of
// a list element). Each element of a list of objects is checked the same
// way, its fields named like events[2].type.
func checkFields(body []byte, t reflect.Type, prefix string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var obj map[string]json.RawMessage
	if t.Kind() != reflect.Struct || json.Unmarshal(body, &obj) != nil {
		return nil
	}
	fields := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			fields[name] = t.Field(i).Type
		}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the same body always names the same field
	for _, k := range keys {
		ft, ok := fields[k]
		if !ok {
			return errValidation(prefix+k, fmt.Sprintf("Unknown field %q.", prefix+k))
		}
		// A nested object (a portal session's branding) names its fields
		// like branding.accent_color.
		if nested := plainStruct(ft); nested != nil {
			if err := checkFields(obj[k], nested, prefix+k+"."); err != nil {
				return err
			}
		}
		var items []json.RawMessage
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct && json.Unmarshal(obj[k], &items) == nil {
			for i, item := range items {
				name := fmt.Sprintf("%s%s[%d]", prefix, k, i)
				if err := checkFields(item, ft.Elem(), name+"."); err != nil {
					return err
				}
				if err := json.Unmarshal(item, reflect.New(ft.Elem()).Interface()); err != nil {
					return fieldError(err, name)
				}
			}
		}
		if err := json.Unmarshal(obj[k], reflect.New(ft).Interface()); err != nil {
			return fieldError(err, prefix+k)
		}
	}
	return nil
}

// plainStruct is t's struct type when t is a struct or a pointer to one
// that decodes field by field (no UnmarshalJSON of its own), else nil.
func plainStruct(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return nil
	}
	return t
}

// fieldError is the refusal of a field whose value did not decode.
func fieldError(err error, field string) *Error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Field != "" {
			field += "." + typeErr.Field
		}
		return errInvalid(field, fmt.Sprintf("%s must be of type %s.", field, jsonType(typeErr.Type.Kind().String())))
	}
	return errInvalid(field, field+" has an invalid value.")
}

// jsonError maps an error of decoding a whole body to the API error.
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
