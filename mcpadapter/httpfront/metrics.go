package httpfront

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/liveview"
	"github.com/graph-engineering/graph-engineering-mcp/mcpadapter/tools"
	"github.com/graph-engineering/graph-engineering-mcp/taskgraph"
)

// MetricsNamespace prefixes every metric this server exports.
const MetricsNamespace = "graph_engineering"

// metricsQueryTimeout bounds the database reads one scrape makes.
const metricsQueryTimeout = 5 * time.Second

// Metrics holds the server's Prometheus metrics in a private registry (no
// global state). Create it before opening the store so that
// [Metrics.ObserveBatch] can be passed as taskgraph.Options.OnBatch, then
// call [Metrics.RegisterStore] once the store is open; pass
// [Metrics.ObserveToolCall] as mcpadapter.Config.OnToolCall and the metrics
// as Options.Metrics. Its methods are safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry
	log *slog.Logger

	toolCalls  *prometheus.CounterVec
	httpDur    *prometheus.HistogramVec
	mcpDur     *prometheus.HistogramVec
	rejections *prometheus.CounterVec
	inFlight   prometheus.Gauge
	longPolls  prometheus.Gauge
	evictions  *prometheus.CounterVec
	batchSize  prometheus.Histogram
	batchDur   prometheus.Histogram
	batchErrs  prometheus.Counter
	unavail    *prometheus.CounterVec
}

// NewMetrics returns the metrics with the Go runtime and process collectors
// registered. logger receives scrape errors; nil discards them.
func NewMetrics(logger *slog.Logger) *Metrics {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{reg: prometheus.NewRegistry(), log: logger}
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: MetricsNamespace, Name: "tool_calls_total",
		Help: "MCP tool calls by tool and outcome (ok, invalid, not_found, conflict, stale_claim, forbidden, unavailable, protocol_error, internal_error, deadline).",
	}, []string{"tool", "outcome"})
	m.httpDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: MetricsNamespace, Name: "http_request_duration_seconds",
		Help:    "HTTP request latency by route (/mcp, /healthz, /readyz, /metrics, other), HTTP method and status code.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"route", "method", "code"})
	m.mcpDur = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: MetricsNamespace, Name: "mcp_request_duration_seconds",
		Help:    "MCP request latency over HTTP by JSON-RPC method and protocol era (legacy: initialize sessions, modern: 2026-07-28, none: refused before routing).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"method", "era"})
	m.rejections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: MetricsNamespace, Name: "http_rejections_total",
		Help: "HTTP requests refused before reaching MCP, by reason (unauthorized, insufficient_scope, keys_unavailable, forbidden_host, forbidden_origin, too_large, busy, too_many_sessions).",
	}, []string{"reason"})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: MetricsNamespace, Name: "http_requests_in_flight",
		Help: "MCP HTTP requests being served now: short calls (bounded by --max-concurrent) plus waiting claims.",
	})
	m.longPolls = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: MetricsNamespace, Name: "http_long_polls_in_flight",
		Help: "Claim-next calls with a positive wait_ms being served over HTTP now; they take no --max-concurrent slot.",
	})
	m.evictions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: MetricsNamespace, Name: "http_evictions_total",
		Help: "Closed to make room at a cap, by kind (connection: never carried an authenticated request, at --max-connections; session: never initialized or longest idle legacy session, at --max-sessions).",
	}, []string{"kind"})
	m.batchSize = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: MetricsNamespace, Name: "store_batch_size",
		Help:    "Operations committed together per group-commit transaction.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
	})
	m.batchDur = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: MetricsNamespace, Name: "store_batch_duration_seconds",
		Help:    "Time to run and commit one group-commit transaction.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
	})
	m.batchErrs = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: MetricsNamespace, Name: "store_batch_errors_total",
		Help: "Group-commit transactions that failed to commit.",
	})
	m.unavail = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: MetricsNamespace, Name: "store_unavailable_total",
		Help: "Writes the database refused, by reason (busy, disk_full, read_only, files_replaced, unreachable, unknown_outcome; MCP.md §4).",
	}, []string{"reason"})
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.toolCalls, m.httpDur, m.mcpDur, m.rejections, m.inFlight, m.longPolls, m.evictions, m.batchSize, m.batchDur, m.batchErrs, m.unavail,
	)
	return m
}

// Registry returns the private registry, for tests and further collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ObserveToolCall counts one tool call; it fits mcpadapter.Config.OnToolCall.
func (m *Metrics) ObserveToolCall(tool, outcome string) {
	m.toolCalls.WithLabelValues(tool, outcome).Inc()
}

// ObserveBatch records one group-commit transaction; it fits
// taskgraph.Options.OnBatch.
func (m *Metrics) ObserveBatch(size int, took time.Duration, err error) {
	m.batchSize.Observe(float64(size))
	m.batchDur.Observe(took.Seconds())
	if err != nil {
		m.batchErrs.Inc()
		if reason, _, ok := taskgraph.UnavailableReason(err); ok {
			m.unavail.WithLabelValues(reason).Inc()
		}
	}
}

// RegisterStore adds the collectors that read the store at scrape time:
// tasks by state, the cumulative lease and claim counters, and the lease
// expiry gauges an operator alerts on. It fails if called twice.
func (m *Metrics) RegisterStore(st *taskgraph.Store) error {
	if st == nil {
		return errors.New("register store metrics: store is nil")
	}
	if err := m.reg.Register(newStoreCollector(st, m.log)); err != nil {
		return fmt.Errorf("register store metrics: %w", err)
	}
	return nil
}

// Handler serves the registry in the Prometheus text format. Collection
// errors (a database that does not answer) are logged and the remaining
// metrics are still served; graph_engineering_database_up reports them.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:            promLogger{m.log},
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 4,
		Timeout:             2 * metricsQueryTimeout,
	})
}

func (m *Metrics) observeHTTP(route, method string, code int, took time.Duration) {
	m.httpDur.WithLabelValues(route, method, fmt.Sprint(code)).Observe(took.Seconds())
}

func (m *Metrics) observeMCP(method, era string, took time.Duration) {
	m.mcpDur.WithLabelValues(method, era).Observe(took.Seconds())
}

func (m *Metrics) reject(reason string) { m.rejections.WithLabelValues(reason).Inc() }

func (m *Metrics) evict(kind string) { m.evictions.WithLabelValues(kind).Inc() }

// registerSessions exports the number of live legacy sessions. Only the
// first HTTP handler of a Metrics registers it.
func (m *Metrics) registerSessions(count func() int) {
	_ = m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: MetricsNamespace, Name: "mcp_sessions",
		Help: "Live legacy (initialize) sessions over HTTP; bounded by --max-sessions.",
	}, func() float64 { return float64(count()) }))
}

// registerSlotWaiters exports the short calls waiting for a concurrency
// slot, holder writes and the others apart.
func (m *Metrics) registerSlotWaiters(waiting func() (holders, others int)) {
	for _, kind := range []string{"holder", "other"} {
		_ = m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: MetricsNamespace, Name: "http_slot_waiters", ConstLabels: prometheus.Labels{"kind": kind},
			Help: "MCP requests waiting for one of the --max-concurrent slots: holder writes (heartbeat, complete, fail, cancel; served first) and other short calls.",
		}, func() float64 {
			h, o := waiting()
			if kind == "holder" {
				return float64(h)
			}
			return float64(o)
		}))
	}
}

// registerListen exports the subscriptions/listen streams (issue 26):
// open now, notifications queued and their bound, notifications sent, and
// streams ended by reason. Only the first HTTP handler of a Metrics
// registers them.
func (m *Metrics) registerListen(read func() mcpadapter.ListenMetrics) {
	gauge := func(name, help string, v func(mcpadapter.ListenMetrics) int) {
		_ = m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: MetricsNamespace, Name: name, Help: help},
			func() float64 { return float64(v(read())) }))
	}
	gauge("listen_streams_open", "subscriptions/listen streams open now; at most 1024.", func(l mcpadapter.ListenMetrics) int { return l.Open })
	gauge("listen_queued_notifications", "Task notifications queued on open subscriptions/listen streams, not yet written.", func(l mcpadapter.ListenMetrics) int { return l.Queued })
	gauge("listen_queue_bound", "The most task notifications the open subscriptions/listen streams may queue (the sum of their bounds).", func(l mcpadapter.ListenMetrics) int { return l.QueueBound })
	_ = m.reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: MetricsNamespace, Name: "listen_notifications_sent_total",
		Help: "notifications/tasks handed to a subscriptions/listen stream's transport.",
	}, func() float64 { return float64(read().Sent) }))
	for _, reason := range []string{"fell_behind", "shutdown", "closed"} {
		_ = m.reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Name: "listen_streams_ended_total", ConstLabels: prometheus.Labels{"reason": reason},
			Help: "subscriptions/listen streams ended, by reason: fell_behind (its queue was full; the server ended it), shutdown, closed (by the client, or a write failed).",
		}, func() float64 { return float64(read().Ended[reason]) }))
	}
}

// registerUIStreams exports the live view's event streams: open now,
// change events written, and streams refused at the bound.
func (m *Metrics) registerUIStreams(read func() liveview.StreamStats) {
	_ = m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: MetricsNamespace, Name: "ui_streams_open",
		Help: "Live view event streams open now (GET /ui/workflows/{id}/events); at most 256.",
	}, func() float64 { return float64(read().Open) }))
	_ = m.reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: MetricsNamespace, Name: "ui_stream_events_total",
		Help: "Change events written to live view event streams.",
	}, func() float64 { return float64(read().Sent) }))
	_ = m.reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: MetricsNamespace, Name: "ui_streams_refused_total",
		Help: "Live view event streams refused at the bound (503; the page polls).",
	}, func() float64 { return float64(read().Refused) }))
}

type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) { l.log.Warn("metrics scrape", "err", fmt.Sprint(v...)) }

// storeCollector reads the store when scraped.
type storeCollector struct {
	st  *taskgraph.Store
	log *slog.Logger

	tasks, up, oldestExpiry, overdue, waiters *prometheus.Desc
	inputTokens, outputTokens, costUSD        *prometheus.Desc
	counters                                  []storeCounter
}

type storeCounter struct {
	desc  *prometheus.Desc
	value func(taskgraph.Stats) int64
}

func newStoreCollector(st *taskgraph.Store, log *slog.Logger) *storeCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(MetricsNamespace, "", name), help, labels, nil)
	}
	c := &storeCollector{
		st: st, log: log,
		tasks:        d("tasks", "Tasks by state, over all workflows, read at scrape time.", "state"),
		up:           d("database_up", "1 if the scrape-time database reads succeeded, else 0."),
		waiters:      d("claim_waiters", "Claim-next calls waiting for a task to become ready right now (idle worker capacity)."),
		oldestExpiry: d("oldest_lease_expiry_timestamp_seconds", "Unix time at which the earliest live lease expires; 0 when no task is claimed."),
		inputTokens:  d("usage_input_tokens", "Input tokens workers reported, summed over every attempt of every task of the stored workflows, read at scrape time (a pruned workflow's usage leaves the sum)."),
		outputTokens: d("usage_output_tokens", "Output tokens workers reported, summed as usage_input_tokens is."),
		costUSD:      d("usage_cost_usd", "Cost in US dollars workers reported, summed as usage_input_tokens is."),
		overdue: d("lease_overdue_seconds",
			"Seconds since the earliest lease expired without the sweeper processing it (0 when none has). The sweeper expires leases within about a second, so a value that keeps growing means stuck work."),
	}
	counter := func(name, help string, v func(taskgraph.Stats) int64) {
		c.counters = append(c.counters, storeCounter{desc: d(name, help+" Counted since this process opened the database."), value: v})
	}
	counter("claims_total", "Leases granted.", func(s taskgraph.Stats) int64 { return s.Claims })
	counter("reclaims_total", "Leases granted on a task that had been claimed before (after an expiry or a retryable failure).", func(s taskgraph.Stats) int64 { return s.Reclaims })
	counter("completions_total", "Tasks completed.", func(s taskgraph.Stats) int64 { return s.Completions })
	counter("failures_total", "Tasks failed terminally, including leases expired on the last attempt.", func(s taskgraph.Stats) int64 { return s.Failures })
	counter("retries_total", "Retryable failures sent back to pending.", func(s taskgraph.Stats) int64 { return s.Retries })
	counter("lease_expiries_total", "Leases that lapsed without a heartbeat.", func(s taskgraph.Stats) int64 { return s.Expiries })
	counter("cancels_total", "Holder and operator cancellations.", func(s taskgraph.Stats) int64 { return s.Cancels })
	counter("cascade_cancels_total", "Dependents cancelled because an upstream task failed or was cancelled.", func(s taskgraph.Stats) int64 { return s.CascadeCancels })
	counter("stale_claim_rejections_total", "Holder writes rejected because the claim was not live (superseded generation or expired lease).", func(s taskgraph.Stats) int64 { return s.StaleRejections })
	return c
}

// Describe implements prometheus.Collector.
func (c *storeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.tasks
	ch <- c.up
	ch <- c.oldestExpiry
	ch <- c.overdue
	ch <- c.waiters
	ch <- c.inputTokens
	ch <- c.outputTokens
	ch <- c.costUSD
	for _, sc := range c.counters {
		ch <- sc.desc
	}
}

// Collect implements prometheus.Collector.
func (c *storeCollector) Collect(ch chan<- prometheus.Metric) {
	stats := c.st.Stats()
	for _, sc := range c.counters {
		ch <- prometheus.MustNewConstMetric(sc.desc, prometheus.CounterValue, float64(sc.value(stats)))
	}
	ch <- prometheus.MustNewConstMetric(c.waiters, prometheus.GaugeValue, float64(c.st.Waiters()))
	ctx, cancel := context.WithTimeout(context.Background(), metricsQueryTimeout)
	defer cancel()
	up := 1.0
	counts, err := c.st.CountByState(ctx)
	if err != nil {
		up = 0
		c.log.Warn("metrics: count tasks by state", "err", err)
		ch <- prometheus.NewInvalidMetric(c.tasks, fmt.Errorf("count tasks by state: %w", err))
	} else {
		for _, state := range taskgraph.States {
			ch <- prometheus.MustNewConstMetric(c.tasks, prometheus.GaugeValue, float64(counts[state]), string(state))
		}
	}
	oldest, err := c.st.OldestLeaseExpiry(ctx)
	if err != nil {
		up = 0
		c.log.Warn("metrics: oldest lease expiry", "err", err)
		ch <- prometheus.NewInvalidMetric(c.oldestExpiry, fmt.Errorf("oldest lease expiry: %w", err))
	} else {
		ts, overdue := 0.0, 0.0
		if !oldest.IsZero() {
			ts = float64(oldest.UnixNano()) / 1e9
			if d := c.st.Clock().Now().Sub(oldest); d > 0 {
				overdue = d.Seconds()
			}
		}
		ch <- prometheus.MustNewConstMetric(c.oldestExpiry, prometheus.GaugeValue, ts)
		ch <- prometheus.MustNewConstMetric(c.overdue, prometheus.GaugeValue, overdue)
	}
	if u, err := c.st.WorkflowUsage(ctx, ""); err != nil {
		up = 0
		c.log.Warn("metrics: sum usage", "err", err)
		ch <- prometheus.NewInvalidMetric(c.inputTokens, fmt.Errorf("sum usage: %w", err))
	} else {
		ch <- prometheus.MustNewConstMetric(c.inputTokens, prometheus.GaugeValue, float64(u.InputTokens))
		ch <- prometheus.MustNewConstMetric(c.outputTokens, prometheus.GaugeValue, float64(u.OutputTokens))
		ch <- prometheus.MustNewConstMetric(c.costUSD, prometheus.GaugeValue, u.CostUSD)
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
}

// methodLabel bounds the method label of metrics to known methods.
func methodLabel(method string) string {
	switch method {
	case "initialize", "ping", "server/discover", "tools/list", "tools/call", "resources/list", "resources/read",
		"resources/templates/list", "prompts/list", "prompts/get", "completion/complete", "logging/setLevel",
		"subscriptions/listen", "skills/list", "skills/get", "resources/directory/read",
		tools.MethodTasksGet, tools.MethodTasksUpdate, tools.MethodTasksCancel,
		"notifications/initialized", "notifications/cancelled":
		return method
	case "":
		return "response"
	}
	if strings.HasPrefix(method, "notifications/") {
		return "notifications/other"
	}
	return "other"
}
