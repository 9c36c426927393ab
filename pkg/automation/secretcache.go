package automation

import (
	"context"
	"strconv"
	"time"
)

// CachedSecrets is a Secrets store that may answer from a short cache in
// the process (at most a minute: smsecrets.Cached), for the secrets read on
// every delivery or run. stamp is the version of the record the secret
// belongs to, as the caller has just read it strongly consistent: a value
// is reused only under the same stamp, so a change of the record (a flow
// update that sets new secrets) reads the store again at once.
type CachedSecrets interface {
	CachedSecret(ctx context.Context, project, name, stamp string) ([]byte, error)
}

// secretStore is the Secrets port with its cache, when the backend has one
// (Config.SecretCache).
type secretStore struct {
	Secrets
	cache CachedSecrets
}

// cachedSecret reads a secret through the cache when there is one.
func cachedSecret(ctx context.Context, secrets secretStore, project, name, stamp string) ([]byte, error) {
	if secrets.cache != nil {
		return secrets.cache.CachedSecret(ctx, project, name, stamp)
	}
	return secrets.Secret(ctx, project, name)
}

// flowStamp names the version of a flow's secrets: they change only with
// the flow's version.
func flowStamp(f Flow) string {
	return "flow/" + strconv.FormatInt(f.Version, 10) + "/" + f.Updated.UTC().Format(time.RFC3339Nano)
}

// connectionStamp names the version of a connection's record: its status
// and last change.
func connectionStamp(c Connection) string {
	return "connection/" + string(c.Status) + "/" + c.Updated.UTC().Format(time.RFC3339Nano)
}
