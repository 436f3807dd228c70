package agent

import (
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// counters are the agent's own counts (the Sender and the rate bound keep theirs).
type counters struct {
	linesRead, gaugesSent, kubeletErrors atomic.Uint64
	ready                                atomic.Bool
}

func (c *counters) fill(st *Stats) {
	st.LinesRead, st.GaugesSent, st.KubeletErrors = c.linesRead.Load(), c.gaugesSent.Load(), c.kubeletErrors.Load()
	st.Ready = c.ready.Load()
}

// OpsHandler serves the agent's operations endpoint (plain HTTP, for the kubelet's probes and
// Prometheus): /healthz (200 while the agent runs), /readyz (200 once its caches are synced and
// the node's pods handed to their followers, 503 before) and /metrics (Prometheus text: the
// counters of Stats, and the Go and process collectors).
func (a *Agent) OpsHandler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&statsCollector{a: a},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !a.counters.ready.Load() {
			http.Error(w, "caches not synced yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return mux
}

var (
	descLinesRead = prometheus.NewDesc("opi_agent_log_lines_read_total",
		"Log lines the agent read from the kubelet's files (joined partial lines count once).", nil, nil)
	descSent = prometheus.NewDesc("opi_agent_envelopes_sent_total",
		"Envelopes (log lines, notices, container metrics) Loggregator's ingress acknowledged.", nil, nil)
	descDropped = prometheus.NewDesc("opi_agent_envelopes_dropped_total",
		"Envelopes dropped, by reason: buffer (the Sender's buffer was full), rate (an instance's log rate bound).", []string{"reason"}, nil)
	descSendErrors = prometheus.NewDesc("opi_agent_send_errors_total",
		"Sends to Loggregator's ingress that failed (and were retried).", nil, nil)
	descBuffered = prometheus.NewDesc("opi_agent_buffered_envelopes",
		"Envelopes waiting for delivery now (in flight included).", nil, nil)
	descFollowed = prometheus.NewDesc("opi_agent_followed_containers",
		"App container log folders followed now (one per opi pod on the node).", nil, nil)
	descGauges = prometheus.NewDesc("opi_agent_container_metrics_sent_total",
		"Container metrics envelopes (one per instance every interval) handed to the Sender.", nil, nil)
	descKubeletErrors = prometheus.NewDesc("opi_agent_kubelet_errors_total",
		"Failed reads of the kubelet's stats summary.", nil, nil)
	descWaits = prometheus.NewDesc("opi_agent_buffer_waits_total",
		"Times a follower found the Sender's buffer full and stopped reading until it had room (back pressure).", nil, nil)
	descLostFiles = prometheus.NewDesc("opi_agent_lost_files_total",
		"Log files (or their unread tails) that went before they were read (rotated away and compressed, or removed).", nil, nil)
	descMalformed = prometheus.NewDesc("opi_agent_log_lines_malformed_total",
		"Lines of the kubelet's log files skipped because they were no CRI log lines.", nil, nil)
	descCkptsUnreadable = prometheus.NewDesc("opi_agent_checkpoints_unreadable_total",
		"1 if the saved checkpoints could not be read at start-up (every container was then read from the start of its files).", nil, nil)
	descReady = prometheus.NewDesc("opi_agent_ready",
		"1 once the agent's caches are synced and the node's pods handed to their followers.", nil, nil)
)

// statsCollector reads Stats at each scrape.
type statsCollector struct{ a *Agent }

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLinesRead, descSent, descDropped, descSendErrors, descBuffered, descFollowed, descGauges, descKubeletErrors, descWaits, descLostFiles, descMalformed, descCkptsUnreadable, descReady} {
		ch <- d
	}
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.a.Stats()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter(descLinesRead, st.LinesRead)
	counter(descSent, st.Sender.Delivered)
	counter(descDropped, st.Sender.Dropped, "buffer")
	counter(descDropped, st.RateDropped, "rate")
	counter(descSendErrors, st.Sender.FailedSends)
	gauge(descBuffered, float64(st.Sender.Buffered))
	gauge(descFollowed, float64(st.Followed))
	counter(descGauges, st.GaugesSent)
	counter(descKubeletErrors, st.KubeletErrors)
	counter(descWaits, st.Sender.Waits)
	counter(descLostFiles, st.LostFiles)
	counter(descMalformed, st.MalformedLines)
	counter(descCkptsUnreadable, st.CheckpointsUnreadable)
	ready := 0.0
	if st.Ready {
		ready = 1
	}
	gauge(descReady, ready)
}
