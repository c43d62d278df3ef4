package main

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"
)

// parseEgressProxy reads WEBHOOKD_EGRESS_PROXY: empty (deliveries dial
// directly) or http://[user:password@]host:port, an HTTP CONNECT proxy.
// TLS to the proxy is not offered: the tunnel carries the receivers' own
// TLS, and the proxy sits beside the engine on the operator's network.
func parseEgressProxy(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("expected an HTTP CONNECT proxy URL such as http://smokescreen:4750: %w", err)
	}
	switch {
	case u.Scheme != "http":
		return nil, fmt.Errorf("expected an http:// URL (an HTTP CONNECT proxy), not scheme %q", u.Scheme)
	case u.Hostname() == "" || u.Port() == "":
		return nil, fmt.Errorf("expected host and port, such as http://smokescreen:4750, not %q", u.Redacted())
	case u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("expected no path, query or fragment in %q", u.Redacted())
	}
	return &url.URL{Scheme: u.Scheme, User: u.User, Host: u.Host}, nil
}

// parsePrefixes reads a list of IP addresses and CIDR prefixes (an address
// is a /32 or /128), as WEBHOOKD_SOURCE_ADDRESSES holds them; blanks are
// skipped, a prefix with host bits set is refused (a typo more often than
// not).
func parsePrefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range list {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if addr, err := netip.ParseAddr(item); err == nil {
			out = append(out, netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(item)
		if err != nil {
			return nil, fmt.Errorf("%q is neither an IP address nor a CIDR prefix such as 203.0.113.0/28", item)
		}
		if p != p.Masked() {
			return nil, fmt.Errorf("%q has bits set past its prefix length; did you mean %s?", item, p.Masked())
		}
		out = append(out, p)
	}
	return out, nil
}
