package transform

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/webhookd/webhookd/internal/customheaders"
	"github.com/webhookd/webhookd/internal/invalid"
)

// returnedFields are the fields handler may return; any other is refused,
// so that a misspelt one ("body", "header") is an error, not a no-op.
var returnedFields = []string{"event_type", "payload", "url", "headers", "cancel"}

// maxURLBytes bounds a returned url before CheckURL reads it.
const maxURLBytes = 2048

// returned checks the JSON handler returned against in: the contract of
// docs/transformations.md, "What handler may change". Every field but
// payload may be left out, meaning unchanged.
func (s *Sandbox) returned(b []byte, in Input) (Output, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil || fields == nil {
		return Output{}, shapeError("handler must return the webhook object; it returned %s", jsonKind(b))
	}
	for name := range fields {
		if !slices.Contains(returnedFields, name) {
			return Output{}, shapeError("the returned webhook has a field %s; it may hold only %s",
				invalid.Quote(name), strings.Join(returnedFields, ", "))
		}
	}
	out := Output{URL: in.URL, Headers: in.Headers}
	if raw, ok := fields["event_type"]; ok {
		var t string
		if json.Unmarshal(raw, &t) != nil || t != in.EventType {
			return Output{}, shapeError("event_type cannot be changed")
		}
	}
	payload, ok := fields["payload"]
	switch {
	case !ok:
		return Output{}, shapeError("the returned webhook has no payload (undefined is not JSON; use null for none)")
	case len(payload) > s.limits.MaxOutputBytes:
		return Output{}, &Error{Kind: KindOutputTooLarge, Message: fmt.Sprintf(
			"the transformed payload is %d bytes of JSON, more than the %d allowed", len(payload), s.limits.MaxOutputBytes)}
	}
	out.Payload = payload
	if raw, ok := fields["url"]; ok {
		url, err := s.url(raw, in.URL)
		if err != nil {
			return Output{}, err
		}
		out.URL = url
	}
	if raw, ok := fields["headers"]; ok {
		h, err := headers(raw)
		if err != nil {
			return Output{}, err
		}
		out.Headers = h
	}
	if raw, ok := fields["cancel"]; ok {
		if json.Unmarshal(raw, &out.Cancel) != nil {
			return Output{}, shapeError("cancel must be true or false; it is %s", jsonKind(raw))
		}
	}
	return out, nil
}

// url checks a returned url: unchanged, or accepted by CheckURL.
func (s *Sandbox) url(raw json.RawMessage, was string) (string, error) {
	var url string
	if json.Unmarshal(raw, &url) != nil {
		return "", &Error{Kind: KindURL, Message: "url must be a string; it is " + jsonKind(raw)}
	}
	switch {
	case url == was:
		return url, nil
	case was == "":
		return "", &Error{Kind: KindURL, Message: "this destination has no url for a transformation to change"}
	case s.checkURL == nil:
		return "", &Error{Kind: KindURL, Message: "this subscription's url cannot be changed by its transformation"}
	case len(url) > maxURLBytes:
		return "", &Error{Kind: KindURL, Message: fmt.Sprintf("the returned url is longer than %d bytes", maxURLBytes)}
	}
	if err := s.checkURL(url); err != nil {
		msg := "the returned url " + invalid.Quote(url) + " is not allowed"
		if bad := invalid.As(err); bad != nil {
			msg += ": " + bad.Message
		}
		return "", &Error{Kind: KindURL, Message: msg}
	}
	return url, nil
}

// headers checks returned headers: an object of strings, by the custom
// header rule. They replace the custom headers whole: a name left out is
// not sent.
func headers(raw json.RawMessage) (map[string]string, error) {
	var values map[string]json.RawMessage
	if json.Unmarshal(raw, &values) != nil || values == nil {
		return nil, &Error{Kind: KindHeaders, Message: "headers must be an object of strings; it is " + jsonKind(raw)}
	}
	h := make(map[string]string, len(values))
	for name, v := range values {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return nil, &Error{Kind: KindHeaders, Message: fmt.Sprintf(
				"headers[%s] must be a string; it is %s", invalid.Quote(name), jsonKind(v))}
		}
		h[name] = s
	}
	if err := customheaders.Check("headers", h); err != nil {
		msg := "the returned headers are refused"
		if bad := invalid.As(err); bad != nil {
			msg = bad.Message
		}
		return nil, &Error{Kind: KindHeaders, Message: msg}
	}
	return h, nil
}

func shapeError(format string, args ...any) *Error {
	return &Error{Kind: KindShape, Message: fmt.Sprintf(format, args...)}
}

// jsonKind names the JSON type of b, as the merchant wrote it.
func jsonKind(b []byte) string {
	switch s := strings.TrimSpace(string(b)); {
	case s == "null":
		return "null"
	case s == "true" || s == "false":
		return "a boolean"
	case strings.HasPrefix(s, `"`):
		return "a string"
	case strings.HasPrefix(s, "["):
		return "an array"
	case strings.HasPrefix(s, "{"):
		return "an object"
	default:
		return "a number"
	}
}
