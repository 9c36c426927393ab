// Package metrics gives flowd's figures to Prometheus: webhooks received by
// outcome, runs by final status, run and step durations, the run queue's
// depth and oldest entry, and store latency, beside the Go runtime's and
// the process's own (resident memory, file descriptors). Figures are
// gathered by decorators around the parts that see them (an HTTP
// middleware on the receivers, a RunStore and a RunQueue that delegate), so
// the domain knows nothing of monitoring. Only flowd imports it; on AWS the
// same figures are CloudWatch metrics.
package metrics

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"flowservice/pkg/automation"
)

// Metrics holds flowd's collectors in a registry of its own, so that
// nothing else in the process can add to what /metrics shows.
type Metrics struct {
	reg          *prometheus.Registry
	webhooks     *prometheus.CounterVec
	runs         *prometheus.CounterVec
	runDuration  prometheus.Histogram
	stepDuration *prometheus.HistogramVec
	storeLatency *prometheus.HistogramVec
}

// New returns the collectors, registered with the Go runtime's and the
// process's.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowd_webhooks_received_total",
			Help: "Webhook deliveries by receiver and outcome (accepted, invalid, unauthorized, forbidden, not_found, method_not_allowed, too_large, unavailable, failed).",
		}, []string{"receiver", "outcome"}),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "flowd_runs_finished_total",
			Help: "Runs that reached a final status, by status.",
		}, []string{"status"}),
		runDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "flowd_run_duration_seconds",
			Help:    "Duration of finished runs, from creation to finish, all attempts.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flowd_step_duration_seconds",
			Help:    "Duration of the steps of finished runs, by step type.",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"type"}),
		storeLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "flowd_store_latency_seconds",
			Help:    "Latency of store operations: ping (health checks and scrapes), enqueue (a webhook's run made durable), finish_run.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5},
		}, []string{"op"}),
	}
	m.reg.MustRegister(m.webhooks, m.runs, m.runDuration, m.stepDuration, m.storeLatency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Receiver counts the deliveries h answers, by the status it wrote.
func (m *Metrics) Receiver(name string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			m.webhooks.WithLabelValues(name, outcome(sw.status)).Inc()
		}()
		h.ServeHTTP(sw, r)
	})
}

// outcome names what a receiver's status means for the sender.
func outcome(status int) string {
	switch {
	case status == 0 || status < 400:
		return "accepted"
	case status == http.StatusUnauthorized:
		return "unauthorized"
	case status == http.StatusForbidden:
		return "forbidden"
	case status == http.StatusNotFound:
		return "not_found"
	case status == http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case status == http.StatusRequestEntityTooLarge:
		return "too_large"
	case status == http.StatusServiceUnavailable:
		return "unavailable"
	case status < 500:
		return "invalid"
	}
	return "failed" // an ON_COMPLETION run that failed or timed out
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ObserveStore records the latency of one store operation.
func (m *Metrics) ObserveStore(op string, d time.Duration) {
	m.storeLatency.WithLabelValues(op).Observe(d.Seconds())
}

// RunStore returns rs with FinishRun observed: every other method is rs's
// own, through the embedded interface.
func (m *Metrics) RunStore(rs automation.RunStore) automation.RunStore {
	return &runStore{RunStore: rs, m: m}
}

type runStore struct {
	automation.RunStore
	m *Metrics
}

// FinishRun saves the final state, then counts the run and its durations
// once it is saved (a refused write, such as a run finished already,
// counts nothing).
func (s *runStore) FinishRun(ctx context.Context, r automation.Run) error {
	start := time.Now()
	err := s.RunStore.FinishRun(ctx, r)
	s.m.ObserveStore("finish_run", time.Since(start))
	if err != nil {
		return err
	}
	s.m.observeRun(r)
	return nil
}

// observeRun counts a run saved final, and its durations.
func (m *Metrics) observeRun(r automation.Run) {
	m.runs.WithLabelValues(string(r.Status)).Inc()
	if r.Finished != nil {
		m.runDuration.Observe(r.Finished.Sub(r.Created).Seconds())
	}
	for _, st := range r.Steps {
		if st.StartedAt != nil && st.FinishedAt != nil {
			m.stepDuration.WithLabelValues(string(st.Type)).Observe(st.FinishedAt.Sub(*st.StartedAt).Seconds())
		}
	}
}

// FinishedRuns returns fr with InsertFinishedRun observed as FinishRun is:
// a run stored final in its one commit counts as a finished run.
func (m *Metrics) FinishedRuns(fr automation.FinishedRuns) automation.FinishedRuns {
	return &finishedRuns{fr: fr, m: m}
}

type finishedRuns struct {
	fr automation.FinishedRuns
	m  *Metrics
}

func (f *finishedRuns) InsertFinishedRun(ctx context.Context, r automation.Run) error {
	start := time.Now()
	err := f.fr.InsertFinishedRun(ctx, r)
	f.m.ObserveStore("insert_finished_run", time.Since(start))
	if err != nil {
		return err
	}
	f.m.observeRun(r)
	return nil
}

// RunQueue returns q with Enqueue's latency observed: the store write a
// webhook waits for before it is answered.
func (m *Metrics) RunQueue(q automation.RunQueue) automation.RunQueue {
	return &runQueue{RunQueue: q, m: m}
}

type runQueue struct {
	automation.RunQueue
	m *Metrics
}

func (q *runQueue) Enqueue(ctx context.Context, r automation.Run) error {
	start := time.Now()
	err := q.RunQueue.Enqueue(ctx, r)
	q.m.ObserveStore("enqueue", time.Since(start))
	return err
}

// QueueStats is the state of the run queue at one moment.
type QueueStats struct {
	Depth     int           // entries waiting or being executed, parked ones excluded
	Parked    int           // entries parked after their last attempt
	OldestAge time.Duration // how long the oldest due entry has been due; 0 when none
}

// WatchQueue reads the queue's state at each scrape through stats.
func (m *Metrics) WatchQueue(stats func(context.Context) (QueueStats, error)) {
	m.reg.MustRegister(&queueCollector{stats: stats})
}

var (
	queueDepthDesc  = prometheus.NewDesc("flowd_queue_depth", "Runs in the queue, waiting or executing (parked excluded).", nil, nil)
	queueParkedDesc = prometheus.NewDesc("flowd_queue_parked", "Runs parked in the queue after their last attempt.", nil, nil)
	queueAgeDesc    = prometheus.NewDesc("flowd_queue_oldest_age_seconds", "How long the oldest due queue entry has been due.", nil, nil)
	queueUpDesc     = prometheus.NewDesc("flowd_queue_stats_up", "1 when the queue's state could be read at this scrape.", nil, nil)
)

type queueCollector struct {
	stats func(context.Context) (QueueStats, error)
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepthDesc
	ch <- queueParkedDesc
	ch <- queueAgeDesc
	ch <- queueUpDesc
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.stats(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(queueUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(queueUpDesc, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(st.Depth))
	ch <- prometheus.MustNewConstMetric(queueParkedDesc, prometheus.GaugeValue, float64(st.Parked))
	ch <- prometheus.MustNewConstMetric(queueAgeDesc, prometheus.GaugeValue, st.OldestAge.Seconds())
}

// HandlerOptions says who may read /metrics.
type HandlerOptions struct {
	// Token, when set, must come as "Authorization: Bearer <Token>".
	Token string
	// Open admits any caller without a token (flowd on a loopback address
	// with no token configured). With neither, every scrape is refused.
	Open bool
	// Ping, when set, is timed at each scrape as the store's "ping".
	Ping func(context.Context) error
	// Refuse writes the answer to a caller without access (the JSON error
	// envelope of the HTTP layer).
	Refuse func(w http.ResponseWriter, r *http.Request, status int, code, msg string)
}

// Handler serves the Prometheus text format.
func (m *Metrics) Handler(o HandlerOptions) http.Handler {
	prom := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	want := sha256.Sum256([]byte(o.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			o.Refuse(w, r, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "/metrics takes GET")
			return
		}
		if o.Token != "" {
			scheme, got, _ := strings.Cut(r.Header.Get("Authorization"), " ")
			g := sha256.Sum256([]byte(strings.TrimSpace(got)))
			if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(g[:], want[:]) != 1 {
				w.Header().Set("WWW-Authenticate", "Bearer")
				o.Refuse(w, r, http.StatusUnauthorized, "UNAUTHORIZED", "send Authorization: Bearer <FLOWD_METRICS_TOKEN>")
				return
			}
		} else if !o.Open || !loopbackHost(r.Host) {
			// Open is for a loopback listener, and then for loopback names
			// only: a page on another site can reach 127.0.0.1 through a
			// name of its own that resolves there (DNS rebinding), and its
			// requests carry that name as Host.
			o.Refuse(w, r, http.StatusForbidden, "METRICS_TOKEN_REQUIRED",
				"metrics are served without a token only on a loopback address, asked for by a loopback name; set FLOWD_METRICS_TOKEN")
			return
		}
		if o.Ping != nil {
			start := time.Now()
			if err := o.Ping(r.Context()); err == nil {
				m.ObserveStore("ping", time.Since(start))
			}
		}
		prom.ServeHTTP(w, r)
	})
}

// IsLoopback reports whether a listen address (host:port) is on loopback
// only: "127.0.0.1:8080", "[::1]:8080", "localhost:8080".
func IsLoopback(addr string) bool {
	host := addr
	if i := strings.LastIndex(addr, ":"); i >= 0 {
		host = addr[:i]
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// loopbackHost reports whether a request's Host names loopback:
// "localhost" or a loopback address, with or without a port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
