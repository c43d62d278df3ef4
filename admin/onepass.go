package admin

import (
	"bytes"
	"net/http"
	"reflect"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/webhookd/webhookd/internal/invalid"
)

// decodeJSONOnePass is decodeJSON for the ingest endpoints, the hot path:
// their requests are strings and raw payloads, which a strict decoder reads
// in one pass, where decodeBody's checks read a 1 KiB payload four times
// over (a decode, a token walk for the keys' case, and the payload's
// raw copy within each). Whatever the one pass refuses, and any body it
// accepts that holds text Postgres cannot store, goes through decodeBody,
// which decides as it always did and names the fault: the one pass only
// ever accepts a body decodeBody accepts, into the same value
// (FuzzDecodeOnePass).
func decodeJSONOnePass(r *http.Request, v any) error {
	if err := checkJSONContentType(r); err != nil {
		return err
	}
	return decodeOnePass(requestBody(r), v)
}

// decodeOnePass is decodeBody with the one-pass decoder tried first; v is a
// pointer to a struct. The decoder is as strict as decodeBody by its
// defaults (keys matched with their case, none twice, text only UTF-8)
// and by the option that refuses unknown keys at any depth.
func decodeOnePass(body []byte, v any) error {
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '{' &&
		jsonv2.Unmarshal(body, v, jsonv2.RejectUnknownMembers(true)) == nil && invalid.FindText(body) == nil {
		return nil
	}
	// The one pass may have filled part of v before it refused: decodeBody
	// starts from the zero value, as a caller's fresh variable would.
	reflect.ValueOf(v).Elem().SetZero()
	return decodeBody(body, v)
}
