package producer

import "github.com/redis/go-redis/v9"

// ClusterConnOpt is the asynq connection of a redis-cluster:// URL
// (AsynqRedisOpt): every asynq client made from it is the
// *redis.ClusterClient RedisConn.NewClient makes, with the options
// parseClusterURL chose to follow a failover (clusterStateReload).
type ClusterConnOpt struct {
	// Options are the Cluster client's; each client gets its own copy.
	Options redis.ClusterOptions
}

// MakeRedisClient returns a new *redis.ClusterClient; it makes ClusterConnOpt
// an asynq.RedisConnOpt.
func (o ClusterConnOpt) MakeRedisClient() any {
	return newClusterClient(o.Options)
}

// newClusterClient is a Cluster client on a copy of o: go-redis fills in
// the defaults of the options it is given, which then would be shared by
// every client made from one URL.
func newClusterClient(o redis.ClusterOptions) *redis.ClusterClient {
	return redis.NewClusterClient(&o)
}
