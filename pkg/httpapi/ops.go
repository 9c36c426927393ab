package httpapi

import (
	"context"
	"net/http"
	"time"
)

// healthTimeout bounds the store check of GET /healthz, so that a wedged
// store makes the check fail rather than hang.
const healthTimeout = 2 * time.Second

// WithHealth makes GET /healthz check the store with ping: 200
// {"status":"ok"} when it answers, 503 otherwise. Without it the check only
// says that the process serves HTTP.
func WithHealth(ping func(context.Context) error) APIOption {
	return func(a *API) { a.ping = ping }
}

// WithMetrics serves h on GET /metrics (flowd's Prometheus figures; h does
// its own access control). Without it /metrics is a 404: the Lambdas report
// to CloudWatch instead.
func WithMetrics(h http.Handler) APIOption {
	return func(a *API) { a.metrics = h }
}

type health struct {
	Status string `json:"status"`
}

func (a *API) healthz(w http.ResponseWriter, r *http.Request) {
	if a.ping != nil {
		ctx, cancel := context.WithTimeout(r.Context(), healthTimeout)
		defer cancel()
		if err := a.ping(ctx); err != nil {
			a.log.WarnContext(r.Context(), "health check failed", "requestId", RequestID(r.Context()), "err", err)
			w.Header().Set("Retry-After", retryAfterSeconds)
			writeError(w, r, http.StatusServiceUnavailable, "STORE_UNAVAILABLE", "the store does not answer")
			return
		}
	}
	writeJSON(w, http.StatusOK, health{Status: "ok"})
}

func (a *API) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if a.metrics == nil {
		writeError(w, r, http.StatusNotFound, "NOT_FOUND", "metrics are not served here")
		return
	}
	a.metrics.ServeHTTP(w, r)
}

// WriteError writes the error envelope, with the request's ID, for handlers
// mounted in the API (WithMetrics) that refuse a request.
func WriteError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	writeError(w, r, status, code, msg)
}
