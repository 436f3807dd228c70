package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"strings"
	"time"

	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/loggregator"
)

// DefaultMetricsInterval is how often container metrics are sent (Diego's rep: every 15 s).
const DefaultMetricsInterval = 15 * time.Second

// MinMetricsInterval and MaxMetricsInterval bound the interval an operator may set: below a
// second each round costs the kubelet a full stats summary for little gain, and above a few
// minutes `cf app` shows usage too old to act on.
const (
	MinMetricsInterval = time.Second
	MaxMetricsInterval = 5 * time.Minute
)

// maxSummaryBytes bounds the kubelet's answer read (a full node's summary is well below it).
const maxSummaryBytes = 64 << 20

// Kubelet is where the container metrics come from: the node's kubelet stats summary.
type Kubelet struct {
	// URL is the kubelet, https://HOST:PORT ("" sends no container metrics).
	URL string
	// CAFile is the CA of the kubelet's serving certificate; TokenFile the bearer token
	// presented to it (the service account's, reread on every request: it rotates).
	CAFile, TokenFile string
	// Interval is how often the gauges are sent (DefaultMetricsInterval).
	Interval time.Duration
}

// kubeletClient reads the stats summary.
type kubeletClient struct {
	url, tokenFile string
	http           *http.Client
}

func newKubeletClient(k Kubelet) (*kubeletClient, error) {
	pool := x509.NewCertPool()
	if k.CAFile == "" {
		return nil, errors.New("agent: the kubelet's CA file is required for container metrics")
	}
	pem, err := os.ReadFile(k.CAFile)
	if err != nil {
		return nil, fmt.Errorf("agent: kubelet CA: %w", err)
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("agent: kubelet CA %s holds no PEM certificate", k.CAFile)
	}
	return &kubeletClient{
		url: strings.TrimSuffix(k.URL, "/") + "/stats/summary", tokenFile: k.TokenFile,
		http: &http.Client{
			Timeout:   10 * time.Second,
			Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
		},
	}, nil
}

func (c *kubeletClient) summary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, err
	}
	if c.tokenFile != "" {
		token, err := os.ReadFile(c.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("kubelet token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("kubelet stats summary: %s", resp.Status)
	}
	var s statsv1alpha1.Summary
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxSummaryBytes)).Decode(&s); err != nil {
		return nil, fmt.Errorf("decode kubelet stats summary: %w", err)
	}
	return &s, nil
}

// metricsLoop sends the followed pods' container gauges every interval until ctx ends.
func (a *Agent) metricsLoop(ctx context.Context, c *kubeletClient) {
	logger := a.logger.Session("metrics")
	t := time.NewTicker(a.cfg.Kubelet.Interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s, err := c.summary(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.counters.kubeletErrors.Add(1)
			if !failing {
				logger.Error("stats-summary-failed", err)
			}
			failing = true
			continue
		}
		if failing {
			logger.Info("stats-summary-read-again")
			failing = false
		}
		a.sendMetrics(s, time.Now())
	}
}

// gauges is the identity of the instance's container gauges: its lines' instance_id and tags
// (less source_type, which is for logs), under its gauge source and nowhere else. CC's OPI mode
// reads a process's usage from its guid and keeps every envelope there, grouped by instance_id:
// a worker's or a newer web process's gauges sent under the app guid, which is the original web
// process's guid, would fill that process's rows.
func (in instance) gauges() loggregator.Identity {
	tags := maps.Clone(in.logs.Tags)
	delete(tags, "source_type")
	return loggregator.Identity{SourceID: in.gaugeSource, InstanceID: in.logs.InstanceID, Tags: tags}
}

// sendMetrics sends one gauge envelope per followed pod the summary has its app container of.
func (a *Agent) sendMetrics(s *statsv1alpha1.Summary, now time.Time) {
	for _, ps := range s.Pods {
		a.mu.Lock()
		f := a.followed[ps.PodRef.UID]
		a.mu.Unlock()
		if f == nil {
			continue
		}
		var cs *statsv1alpha1.ContainerStats
		for i := range ps.Containers {
			if ps.Containers[i].Name == names.ContainerName {
				cs = &ps.Containers[i]
			}
		}
		if cs == nil {
			continue
		}
		in, ok := a.identity(f, false)
		if !ok || in.gaugeSource == "" { // no guid of its own: never under another source
			continue
		}
		p := f.current()
		u := loggregator.Usage{MemoryQuotaBytes: p.MemoryLimit, DiskQuotaBytes: p.DiskLimit}
		if cs.CPU != nil && cs.CPU.UsageNanoCores != nil {
			u.CPUPercent = float64(*cs.CPU.UsageNanoCores) / 1e7 // 1e9 nanocores = one core = 100 %
		}
		if cs.Memory != nil && cs.Memory.WorkingSetBytes != nil {
			u.MemoryBytes = *cs.Memory.WorkingSetBytes
		}
		for _, fs := range []*statsv1alpha1.FsStats{cs.Rootfs, cs.Logs} {
			if fs != nil && fs.UsedBytes != nil {
				u.DiskBytes += *fs.UsedBytes
			}
		}
		if a.sender.Emit(loggregator.NewContainerMetrics(in.gauges(), now, u), nil) {
			a.counters.gaugesSent.Add(1)
		}
	}
}
