package producer

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// The schemes of the highly available topologies. The TLS forms add an s
// to "redis", as rediss:// does for a single server.
const (
	schemeSentinel    = "redis-sentinel"
	schemeSentinelTLS = "rediss-sentinel"
	schemeCluster     = "redis-cluster"
	schemeClusterTLS  = "rediss-cluster"
)

// Default ports of a host named without one.
const (
	defaultSentinelPort = "26379"
	defaultClusterPort  = "6379"
)

// clusterStateReload is how old the slot map a Cluster client holds may
// grow before the client asks a node for it again. go-redis asks again at
// once when a node answers MOVED or ASK, but a master that died answers
// nothing: until the map is this old, every command for its slots goes to
// its address and fails, though its replica took them over. With
// go-redis's default, a minute, deliveries resumed 55.8 s after the
// promotion in TestClusterFailover (the engine's clients had loaded the
// map when it started); with a second, 0.09 – 1.0 s. The price is one
// CLUSTER SLOTS a second from each busy client.
const clusterStateReload = time.Second

// clusterReadTimeout bounds the wait for a Cluster node's answer (and for
// a write to it). A master that stops answering without closing its
// connections (a hung process, a machine gone) holds each command for it
// this long, and go-redis tries the same node again before it turns to
// the slot map, which by then names the replica. In TestClusterFailover,
// deliveries resumed after the promotion of a hung master's replica in
// 12.0 s with go-redis's default, 5 s; in 3.1 – 4.9 s with 2 s (6.9 –
// 8.7 s with the schedule sharded over hash tags, its takes pipelined);
// in 2.1 – 3.4 s with 1 s, either way. A node that takes a second to
// answer is failing its clients already. Blocking commands (BLPOP) are
// not bound by it: go-redis gives them their own timeout and 10 s more.
const clusterReadTimeout = time.Second

// urlForms is what every parse error says the URL should look like.
const urlForms = "expected a Redis URL such as redis://127.0.0.1:6379/0, rediss://host:6380/0, unix:///run/redis.sock, " +
	"redis-sentinel://host1:26379,host2:26379/mymaster/0 or redis-cluster://host1:7000,host2:7001"

// RedisConn is where a Redis URL points: exactly one of Server (one
// server), Sentinel (the master a set of Sentinels names) and Cluster (a
// Redis Cluster, found from any of its nodes) is set.
type RedisConn struct {
	Server   *redis.Options
	Sentinel *redis.FailoverOptions
	Cluster  *redis.ClusterOptions
}

// ParseRedisURL reads a Redis URL the way webhookd reads
// WEBHOOKD_REDIS_URL, so that the core API and the engine agree on what a
// URL means:
//
//   - redis://[user:password@]host:port[/db], rediss://… for TLS;
//   - unix://[user:password@]/path/to/socket[?db=N];
//   - redis-sentinel://[user:password@]host1:26379,host2:26379/MASTER[/db]
//     (rediss-sentinel://… for TLS to the Sentinels and the servers); the
//     user and password are the servers'; the Sentinels' own, if they
//     have one, go in ?sentinel_username=…&sentinel_password=…;
//   - redis-cluster://[user:password@]host1:7000,host2:7001 (rediss-cluster://
//     for TLS): any nodes of the Cluster, which tells the others; database 0
//     only, as Cluster has no other.
func ParseRedisURL(rawURL string) (*RedisConn, error) {
	scheme, _, _ := strings.Cut(rawURL, "://")
	var (
		c   RedisConn
		err error
	)
	switch scheme {
	case schemeSentinel, schemeSentinelTLS:
		c.Sentinel, err = parseSentinelURL(rawURL)
	case schemeCluster, schemeClusterTLS:
		c.Cluster, err = parseClusterURL(rawURL)
	default:
		c.Server, err = redis.ParseURL(rawURL)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", urlForms, err)
	}
	return &c, nil
}

// parseSentinelURL reads redis-sentinel:// and rediss-sentinel:// URLs.
func parseSentinelURL(rawURL string) (*redis.FailoverOptions, error) {
	u, addrs, err := parseMultiHost(rawURL, defaultSentinelPort)
	if err != nil {
		return nil, err
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if parts[0] == "" || len(parts) > 2 {
		return nil, fmt.Errorf("%s://…/MASTER_NAME[/DB]: the path must name the master, then optionally the database", u.Scheme)
	}
	o := &redis.FailoverOptions{MasterName: parts[0], SentinelAddrs: addrs}
	if len(parts) == 2 {
		if o.DB, err = strconv.Atoi(parts[1]); err != nil || o.DB < 0 {
			return nil, fmt.Errorf("invalid database %q", parts[1])
		}
	}
	o.Username, o.Password = credentials(u)
	q := u.Query()
	o.SentinelUsername, o.SentinelPassword = q.Get("sentinel_username"), q.Get("sentinel_password")
	q.Del("sentinel_username")
	q.Del("sentinel_password")
	if len(q) > 0 {
		return nil, fmt.Errorf("unknown parameters %q: only sentinel_username and sentinel_password", q.Encode())
	}
	if u.Scheme == schemeSentinelTLS {
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return o, nil
}

// parseClusterURL reads redis-cluster:// and rediss-cluster:// URLs.
func parseClusterURL(rawURL string) (*redis.ClusterOptions, error) {
	u, addrs, err := parseMultiHost(rawURL, defaultClusterPort)
	if err != nil {
		return nil, err
	}
	if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
		return nil, fmt.Errorf("database %q: a Redis Cluster has database 0 only", p)
	}
	if u.RawQuery != "" {
		return nil, fmt.Errorf("unknown parameters %q", u.RawQuery)
	}
	o := &redis.ClusterOptions{Addrs: addrs, ClusterStateReloadInterval: clusterStateReload,
		ReadTimeout: clusterReadTimeout, WriteTimeout: clusterReadTimeout}
	o.Username, o.Password = credentials(u)
	if u.Scheme == schemeClusterTLS {
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return o, nil
}

// parseMultiHost parses a URL whose host is a comma-separated list of
// host[:port], giving each its port.
func parseMultiHost(rawURL, defaultPort string) (*url.URL, []string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, err
	}
	if u.Host == "" {
		return nil, nil, errors.New("no host")
	}
	var addrs []string
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" {
			return nil, nil, fmt.Errorf("empty host in %q", u.Host)
		}
		host, port, err := net.SplitHostPort(h)
		if err != nil {
			host, port = h, defaultPort
		}
		if host == "" {
			return nil, nil, fmt.Errorf("host %q: no name", h)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, nil, fmt.Errorf("host %q: invalid port", h)
		}
		addrs = append(addrs, net.JoinHostPort(host, port))
	}
	return u, addrs, nil
}

// credentials are the URL's user and password, either possibly empty.
func credentials(u *url.URL) (user, password string) {
	if u.User == nil {
		return "", ""
	}
	password, _ = u.User.Password()
	return u.User.Username(), password
}

// NewClient returns a go-redis client on the connection: a *redis.Client,
// a failover client following the Sentinels' master, or a
// *redis.ClusterClient (newClusterClient).
func (c *RedisConn) NewClient() redis.UniversalClient {
	switch {
	case c.Sentinel != nil:
		return redis.NewFailoverClient(c.Sentinel)
	case c.Cluster != nil:
		return newClusterClient(*c.Cluster)
	default:
		return redis.NewClient(c.Server)
	}
}

// Addrs are the addresses the URL names, as go-redis's errors spell
// them: the server's (host:port or socket path), the Sentinels' or the
// Cluster nodes'. The master a Sentinel names, and the Cluster nodes not
// in the URL, are learnt at run time and not among them.
func (c *RedisConn) Addrs() []string {
	switch {
	case c.Sentinel != nil:
		return c.Sentinel.SentinelAddrs
	case c.Cluster != nil:
		return c.Cluster.Addrs
	default:
		return []string{c.Server.Addr}
	}
}

// SetTLSConfig replaces the TLS configuration (a private CA, a client
// certificate); on a URL without TLS it turns TLS on.
func (c *RedisConn) SetTLSConfig(t *tls.Config) {
	switch {
	case c.Sentinel != nil:
		c.Sentinel.TLSConfig = t
	case c.Cluster != nil:
		c.Cluster.TLSConfig = t
	default:
		c.Server.TLSConfig = t
	}
}

// SetPoolSize bounds the connections of each client to each server.
func (c *RedisConn) SetPoolSize(n int) {
	switch {
	case c.Sentinel != nil:
		c.Sentinel.PoolSize = n
	case c.Cluster != nil:
		c.Cluster.PoolSize = n
	default:
		c.Server.PoolSize = n
	}
}

// PoolSize is the bound SetPoolSize set, 0 for go-redis's default.
func (c *RedisConn) PoolSize() int {
	switch {
	case c.Sentinel != nil:
		return c.Sentinel.PoolSize
	case c.Cluster != nil:
		return c.Cluster.PoolSize
	default:
		return c.Server.PoolSize
	}
}

// AsynqRedisOpt is the asynq connection of a parsed URL: the same
// servers, credentials, database and TLS, so that a go-redis client and
// the asynq clients made from one URL reach the same place. It is an
// asynq.RedisClientOpt or RedisFailoverClientOpt, or for a Cluster one
// that makes the client NewClient makes (ClusterConnOpt), options and
// pool size included, which asynq.RedisClusterClientOpt cannot carry.
func AsynqRedisOpt(c *RedisConn) asynq.RedisConnOpt {
	switch {
	case c.Sentinel != nil:
		o := c.Sentinel
		return asynq.RedisFailoverClientOpt{MasterName: o.MasterName, SentinelAddrs: o.SentinelAddrs,
			SentinelUsername: o.SentinelUsername, SentinelPassword: o.SentinelPassword,
			Username: o.Username, Password: o.Password, DB: o.DB, PoolSize: o.PoolSize, TLSConfig: o.TLSConfig}
	case c.Cluster != nil:
		return ClusterConnOpt{Options: *c.Cluster}
	default:
		o := c.Server
		return asynq.RedisClientOpt{Network: o.Network, Addr: o.Addr, Username: o.Username, Password: o.Password,
			DB: o.DB, TLSConfig: o.TLSConfig, PoolSize: o.PoolSize}
	}
}

// Option adjusts the connection NewFromURL makes.
type Option func(*RedisConn)

// WithTLSConfig replaces the TLS configuration of a TLS URL (a private
// CA, a client certificate); with another scheme it turns TLS on.
func WithTLSConfig(c *tls.Config) Option {
	return func(o *RedisConn) { o.SetTLSConfig(c) }
}

// WithPoolSize bounds the connections to Redis of each of the producer's
// clients (go-redis's default is ten per CPU).
func WithPoolSize(n int) Option {
	return func(o *RedisConn) { o.SetPoolSize(n) }
}

// NewFromURL returns a Producer on the Redis at rawURL, which takes the
// forms WEBHOOKD_REDIS_URL takes (see ParseRedisURL): give it the engine's
// WEBHOOKD_REDIS_URL. It connects lazily: an unreachable Redis is an
// error of the first Publish, not of NewFromURL.
func NewFromURL(rawURL string, opts ...Option) (*Producer, error) {
	conn, err := ParseRedisURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	for _, o := range opts {
		o(conn)
	}
	return New(AsynqRedisOpt(conn)), nil
}
