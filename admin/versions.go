package admin

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// DefaultVersion is the Banking API version webhookd ships with (spec 9.1).
const DefaultVersion = "2026-05-01"

// Version is one entry of the API version catalogue (spec 2.5).
type Version struct {
	Name         string     `json:"name"`
	ReleasedAt   time.Time  `json:"released_at"`
	DeprecatedAt *time.Time `json:"deprecated_at"`
	SunsetAt     *time.Time `json:"sunset_at"`
}

// Versions is the catalogue, oldest first.
type Versions []Version

// DefaultVersions is the catalogue when none is configured.
func DefaultVersions() Versions {
	return Versions{{Name: DefaultVersion, ReleasedAt: time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)}}
}

// ParseVersions reads a catalogue from JSON (WEBHOOKD_API_VERSIONS): an array
// of {"name","released_at","deprecated_at"?,"sunset_at"?}. Names are
// YYYY-MM-DD dates; released_at defaults to the name's date.
func ParseVersions(s string) (Versions, error) {
	var raw []struct {
		Name         string     `json:"name"`
		ReleasedAt   *time.Time `json:"released_at"`
		DeprecatedAt *time.Time `json:"deprecated_at"`
		SunsetAt     *time.Time `json:"sunset_at"`
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("api versions: %w", err)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("api versions: at least one version is required")
	}
	vs := make(Versions, 0, len(raw))
	for _, r := range raw {
		d, err := time.Parse(time.DateOnly, r.Name)
		if err != nil {
			return nil, fmt.Errorf("api versions: name %q is not a YYYY-MM-DD date", r.Name)
		}
		v := Version{Name: r.Name, ReleasedAt: d, DeprecatedAt: r.DeprecatedAt, SunsetAt: r.SunsetAt}
		if r.ReleasedAt != nil {
			v.ReleasedAt = *r.ReleasedAt
		}
		if v.SunsetAt != nil && v.DeprecatedAt == nil {
			return nil, fmt.Errorf("api versions: %s has a sunset date but no deprecation date", r.Name)
		}
		vs = append(vs, v)
	}
	slices.SortFunc(vs, func(a, b Version) int { return a.ReleasedAt.Compare(b.ReleasedAt) })
	for i := 1; i < len(vs); i++ {
		if vs[i].Name == vs[i-1].Name {
			return nil, fmt.Errorf("api versions: %s is listed twice", vs[i].Name)
		}
	}
	return vs, nil
}

// Latest is the newest version: the one new merchants are pinned to.
func (vs Versions) Latest() string { return vs[len(vs)-1].Name }

// Lookup finds a version by name.
func (vs Versions) Lookup(name string) (Version, bool) {
	for _, v := range vs {
		if v.Name == name {
			return v, true
		}
	}
	return Version{}, false
}

// Usable tells whether a version may be requested at now: known and not
// past its sunset.
func (vs Versions) Usable(name string, now time.Time) bool {
	v, ok := vs.Lookup(name)
	return ok && (v.SunsetAt == nil || now.Before(*v.SunsetAt))
}

// versionEntry is the JSON of one catalogue entry (spec 2.5).
type versionEntry struct {
	Name         string     `json:"name"`
	ReleasedAt   time.Time  `json:"released_at"`
	IsLatest     bool       `json:"is_latest"`
	DeprecatedAt *time.Time `json:"deprecated_at"`
	SunsetAt     *time.Time `json:"sunset_at"`
}

// listVersions answers GET /v1/api_versions: the catalogue, oldest first.
func (d documentHandlers) listVersions(w http.ResponseWriter, _ *http.Request) {
	latest := d.versions.Latest()
	data := make([]versionEntry, 0, len(d.versions))
	for _, v := range d.versions {
		data = append(data, versionEntry{Name: v.Name, ReleasedAt: v.ReleasedAt.UTC(), IsLatest: v.Name == latest,
			DeprecatedAt: utcPtr(v.DeprecatedAt), SunsetAt: utcPtr(v.SunsetAt)})
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": data})
}

// setHeaders echoes the resolved version, with the Deprecation and
// Sunset headers of spec 9.5 when it is deprecated.
func (vs Versions) setHeaders(w http.ResponseWriter, name string) {
	w.Header().Set("api-version", name)
	v, ok := vs.Lookup(name)
	if !ok || v.DeprecatedAt == nil {
		return
	}
	// RFC 9745: Deprecation is a structured date, @unix-seconds.
	w.Header().Set("Deprecation", fmt.Sprintf("@%d", v.DeprecatedAt.Unix()))
	if v.SunsetAt != nil {
		w.Header().Set("Sunset", v.SunsetAt.UTC().Format(http.TimeFormat))
	}
}

// utcPtr is *t in UTC, or nil.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
