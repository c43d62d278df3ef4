package admin

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/webhookd/webhookd/internal/clock"
	"github.com/webhookd/webhookd/internal/store"
)

// Page size limits (spec 4.5, 8).
const (
	defaultLimit = 10
	maxLimit     = 100
)

// cursorBody is what a cursor carries. It is signed with the master key so
// that a client can neither forge a position nor lift the expiry.
type cursorBody struct {
	CreatedAt int64  `json:"c"` // unix microseconds of the last row
	ID        string `json:"i"`
	Expires   int64  `json:"e"` // unix seconds
	Filters   string `json:"f"` // hash of the filters the cursor was issued for
	List      string `json:"l"` // path of the list the cursor was issued by
}

// pager reads a list request's page (limit and cursor) and writes the list
// envelope with the next page's cursor: every list of both listeners shares
// one, so that cursors are signed, bound to their list and filters, and
// expire the same way everywhere.
type pager struct {
	// masterKey signs the cursors.
	masterKey []byte
	// cursorTTL is how long a cursor stays valid, by clock.
	cursorTTL time.Duration
	clock     clock.Clock
}

// filterHash sums the list's filter parameters (everything but limit and
// cursor), so that a cursor cannot be used with other filters (spec 4.5).
func filterHash(q url.Values) string {
	keys := make([]string, 0, len(q))
	for k := range q {
		if k != "limit" && k != "cursor" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	h := sha256.New()
	for _, k := range keys {
		h.Write([]byte(k + "=" + strings.Join(q[k], ",") + "&"))
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:12])
}

// signCursor is the cursor payload's MAC.
func (pg pager) signCursor(payload []byte) []byte {
	mac := hmac.New(sha256.New, pg.masterKey)
	mac.Write([]byte("cursor\x00"))
	mac.Write(payload)
	return mac.Sum(nil)
}

// encodeCursor is the cursor of position c in the list at path list (the
// request's path: each list has one) queried with q.
func (pg pager) encodeCursor(c store.Cursor, list string, q url.Values) string {
	payload, _ := json.Marshal(cursorBody{
		CreatedAt: c.CreatedAt.UnixMicro(), ID: c.ID,
		Expires: pg.clock.Now().Add(pg.cursorTTL).Unix(), Filters: filterHash(q), List: list,
	})
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(pg.signCursor(payload))
}

// listPage is page for a list that takes the given filters besides limit
// and cursor. Any other parameter is refused: a misspelt filter
// (?statuss=failed) must not silently list everything. So is a parameter
// given twice: every reader takes the first value only, so
// ?status=failed&status=pending would list only failed deliveries.
func (pg pager) listPage(r *http.Request, filters ...string) (store.Page, error) {
	known := append([]string{"limit", "cursor"}, filters...)
	if err := wellFormed(r.URL.RawQuery); err != nil {
		return store.Page{}, err
	}
	q := r.URL.Query()
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(known, name) {
			return store.Page{}, errInvalid(name, fmt.Sprintf("This list takes no parameter %q; it takes %s.", name, strings.Join(known, ", ")))
		}
		if len(q[name]) > 1 {
			return store.Page{}, errInvalid(name, fmt.Sprintf("The query parameter %q is given %d times; give it once.", name, len(q[name])))
		}
	}
	return pg.page(r)
}

// wellFormed refuses a query string holding a pair that url.Values would
// drop (a bad percent-escape, a semicolon) or a value without a
// name: either way a filter the client meant would silently not apply.
// The param is the pair's name, or the pair as sent when it has none.
func wellFormed(rawQuery string) error {
	for pair := range strings.SplitSeq(rawQuery, "&") {
		if pair == "" {
			continue
		}
		rawName, _, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(rawName)
		if err != nil {
			name = rawName
		}
		if name == "" {
			return errInvalid(pair, fmt.Sprintf("The query parameter %q has no name.", pair))
		}
		if _, err := url.ParseQuery(pair); err != nil {
			return errInvalid(name, fmt.Sprintf("The query parameter %q is malformed: %v.", name, err))
		}
	}
	return nil
}

// page reads limit and cursor from the query.
func (pg pager) page(r *http.Request) (store.Page, error) {
	q := r.URL.Query()
	p := store.Page{Limit: defaultLimit}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > maxLimit {
			return p, errInvalid("limit", "limit must be an integer from 1 to 100.")
		}
		p.Limit = n
	}
	raw := q.Get("cursor")
	if raw == "" {
		return p, nil
	}
	bad := newError(http.StatusBadRequest, catInvalidRequest, "invalid_cursor",
		"The cursor is malformed or expired; list again without cursor.").withParam("cursor")
	enc, sig, ok := strings.Cut(raw, ".")
	if !ok {
		return p, bad
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(enc)
	mac, err2 := base64.RawURLEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, pg.signCursor(payload)) {
		return p, bad
	}
	var c cursorBody
	if err := json.Unmarshal(payload, &c); err != nil || pg.clock.Now().Unix() >= c.Expires {
		return p, bad
	}
	if c.List != r.URL.Path {
		// A position in one list means nothing in another: the events
		// list's cursor would page the deliveries from an event's time.
		return p, newError(http.StatusBadRequest, catInvalidRequest, "cursor_mismatch",
			"The cursor was issued by another list; list again without cursor.").withParam("cursor")
	}
	if c.Filters != filterHash(q) {
		return p, newError(http.StatusBadRequest, catInvalidRequest, "cursor_mismatch",
			"The cursor was issued for other filters; list again without cursor.").withParam("cursor")
	}
	p.After = &store.Cursor{CreatedAt: time.UnixMicro(c.CreatedAt).UTC(), ID: c.ID}
	return p, nil
}

// list is the envelope of every list answer (spec 4.5).
type list[T any] struct {
	Data       []T     `json:"data"`
	HasMore    bool    `json:"has_more"`
	NextCursor *string `json:"next_cursor"`
}

// writeList answers one page. rows holds up to Limit+1 items (the extra one
// tells whether there is more); position gives an item's cursor. resume,
// when set, is where the next page starts although rows holds at most Limit
// items: the store stopped reading at its bound on rows examined
// (store.MaxRowsExamined), so the page is short, even empty, and has more.
func writeList[R, T any](pg pager, w http.ResponseWriter, r *http.Request, p store.Page, rows []R, resume *store.Cursor, position func(R) store.Cursor, view func(R) T) {
	out := list[T]{Data: make([]T, 0, min(len(rows), p.Limit))}
	if len(rows) > p.Limit {
		rows = rows[:p.Limit]
		c := position(rows[len(rows)-1])
		resume = &c
	}
	if resume != nil {
		out.HasMore = true
		c := pg.encodeCursor(*resume, r.URL.Path, r.URL.Query())
		out.NextCursor = &c
	}
	for _, row := range rows {
		out.Data = append(out.Data, view(row))
	}
	writeJSON(w, http.StatusOK, out)
}

// rfc3339 is RFC 3339's date-time as the OpenAPI document states it:
// time.Parse alone also takes a one-digit hour.
var rfc3339 = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$`)

// parseTimestamp reads an RFC 3339 timestamp strictly.
func parseTimestamp(v string) (time.Time, bool) {
	if !rfc3339.MatchString(v) {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	return t, err == nil
}

// timeFilter parses an RFC 3339 query parameter such as created_at.gte.
// Present, it must hold a time: an empty value is no timestamp.
func timeFilter(r *http.Request, name string) (*time.Time, error) {
	if !r.URL.Query().Has(name) {
		return nil, nil
	}
	t, ok := parseTimestamp(r.URL.Query().Get(name))
	if !ok {
		return nil, errInvalid(name, name+" must be an RFC 3339 timestamp such as 2026-05-01T00:00:00Z.")
	}
	return &t, nil
}
