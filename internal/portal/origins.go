package portal

import (
	"fmt"
	"net/url"
	"strings"
)

// ParseFrameAncestors checks a list of origins allowed to frame the portal
// and returns them in the form a Content-Security-Policy takes
// (scheme://host[:port], lower case). Each must be an http or https origin
// with a host and nothing after it: a path, query or fragment would be
// ignored by browsers and hide a mistake.
func ParseFrameAncestors(origins []string) ([]string, error) {
	out := make([]string, 0, len(origins))
	for _, raw := range origins {
		o := strings.TrimSpace(raw)
		if o == "" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil {
			return nil, fmt.Errorf("origin %q: %w", o, err)
		}
		switch {
		case u.Scheme != "http" && u.Scheme != "https":
			return nil, fmt.Errorf("origin %q: must start with https:// or http://", o)
		case u.Host == "" || u.Hostname() == "":
			return nil, fmt.Errorf("origin %q: has no host", o)
		case u.User != nil:
			return nil, fmt.Errorf("origin %q: must not hold a user name", o)
		case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(o, "?#"):
			return nil, fmt.Errorf("origin %q: must be scheme://host[:port] with no path", o)
		case strings.ContainsAny(u.Host, " ;,'*"):
			return nil, fmt.Errorf("origin %q: host holds a character an origin cannot", o)
		}
		out = append(out, strings.ToLower(u.Scheme+"://"+u.Host))
	}
	return out, nil
}
