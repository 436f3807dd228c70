package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"

	"github.com/opi-bridge/opi/agent"
	"github.com/opi-bridge/opi/cmd/internal/cli"
	"github.com/opi-bridge/opi/k8s/instances/restsources"
	"github.com/opi-bridge/opi/loggregator"
)

// AgentConfig is what `opi agent` is run with: flags only (it is a DaemonSet's container, or a
// plain process on a node).
type AgentConfig struct {
	agent.Config
	Kubeconfig string
	LogLevel   string
	// OpsListen is the ops endpoint's address (agent_ops.go); "" serves none.
	OpsListen string
}

// kubeletPort is the kubelet's authenticated port.
const kubeletPort = "10250"

// parseAgentFlags reads `opi agent`'s flags and validates them (errors name the flag). Defaults
// from the environment: NODE_NAME (the downward API's spec.nodeName), NODE_IP (status.hostIP:
// the kubelet at https://NODE_IP:10250) and KUBECONFIG.
func parseAgentFlags(args []string) (AgentConfig, error) {
	var kubeletURL string
	if ip := os.Getenv("NODE_IP"); ip != "" {
		kubeletURL = "https://" + net.JoinHostPort(ip, kubeletPort)
	}
	cfg := AgentConfig{
		Config: agent.Config{
			Node:           os.Getenv("NODE_NAME"),
			Namespace:      "cf-workloads",
			Workload:       agent.WorkloadDeployments,
			PodLogs:        agent.DefaultPodLogs,
			LinesPerSecond: agent.DefaultLinesPerSecond,
			LineBurst:      agent.DefaultLineBurst,
			BytesPerSecond: agent.DefaultBytesPerSecond,
			ByteBurst:      agent.DefaultByteBurst,
			Loggregator:    loggregator.SenderConfig{ServerName: loggregator.DefaultServerName},
			Kubelet:        agent.Kubelet{URL: kubeletURL, Interval: agent.DefaultMetricsInterval},
		},
		Kubeconfig: os.Getenv("KUBECONFIG"),
		LogLevel:   "info",
		OpsListen:  defaultAgentOpsListen,
	}
	fs := agentFlags(&cfg)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("opi agent takes no arguments, got %q", fs.Args())
	}
	if cfg.Kubelet.URL != "" && cfg.Kubelet.TokenFile == "" {
		dir := os.Getenv("OPI_SERVICEACCOUNT_DIR")
		if dir == "" {
			dir = cli.ServiceAccountDir
		}
		cfg.Kubelet.TokenFile = filepath.Join(dir, "token")
	}
	return cfg, cfg.validate()
}

// agentFlags binds `opi agent`'s flags to cfg's fields.
func agentFlags(cfg *AgentConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("opi agent", flag.ContinueOnError)
	fs.StringVar(&cfg.Node, "node", cfg.Node, "the node this agent runs on (default $NODE_NAME)")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", cfg.Kubeconfig, "kubeconfig of the cluster (default $KUBECONFIG, else in-cluster)")
	fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "opi's apps namespace")
	fs.StringVar(&cfg.Workload, "backend", cfg.Workload, "opi's backend: deployments or statefulsets (how instances are indexed)")
	fs.StringVar(&cfg.PodLogs, "pod-logs", cfg.PodLogs, "the kubelet's pod log folder (read only)")
	fs.StringVar(&cfg.StateDir, "state-dir", cfg.StateDir, "a writable folder of the agent's own for its checkpoints (required)")
	fs.StringVar(&cfg.Kubelet.URL, "kubelet-url", cfg.Kubelet.URL, "the node's kubelet, https://HOST:PORT, for container metrics (default https://$NODE_IP:10250; none: no metrics)")
	fs.StringVar(&cfg.Kubelet.CAFile, "kubelet-ca", cfg.Kubelet.CAFile, "CA (PEM) of the kubelet's serving certificate")
	fs.StringVar(&cfg.Kubelet.TokenFile, "kubelet-token-file", cfg.Kubelet.TokenFile, "bearer token presented to the kubelet (default the service account's)")
	fs.DurationVar(&cfg.Kubelet.Interval, "metrics-interval", cfg.Kubelet.Interval, fmt.Sprintf("how often the container metrics are sent (%s to %s)", agent.MinMetricsInterval, agent.MaxMetricsInterval))
	fs.StringVar(&cfg.Loggregator.Addr, "loggregator-addr", cfg.Loggregator.Addr, "Loggregator's v2 ingress, HOST:PORT (required)")
	fs.StringVar(&cfg.Loggregator.CAFile, "loggregator-ca", cfg.Loggregator.CAFile, "CA (PEM) of the ingress's certificate")
	fs.StringVar(&cfg.Loggregator.CertFile, "loggregator-cert", cfg.Loggregator.CertFile, "client certificate (PEM) presented to the ingress")
	fs.StringVar(&cfg.Loggregator.KeyFile, "loggregator-key", cfg.Loggregator.KeyFile, "client key (PEM)")
	fs.StringVar(&cfg.Loggregator.ServerName, "loggregator-server-name", cfg.Loggregator.ServerName, "name the ingress's certificate holds (metron for an agent, doppler for a Doppler)")
	fs.Float64Var(&cfg.LinesPerSecond, "log-rate", cfg.LinesPerSecond, "log lines per second each instance may send")
	fs.IntVar(&cfg.LineBurst, "log-burst", cfg.LineBurst, "log lines an instance may send at once above the rate")
	fs.Int64Var(&cfg.BytesPerSecond, "log-bytes-rate", cfg.BytesPerSecond, "bytes of log text per second each instance may send")
	fs.Int64Var(&cfg.ByteBurst, "log-bytes-burst", cfg.ByteBurst, "bytes of log text an instance may send at once above the rate")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, error or fatal")
	fs.StringVar(&cfg.OpsListen, "ops-listen", cfg.OpsListen, "address of the plain HTTP ops endpoint (/healthz, /readyz, /metrics); empty: none")
	return fs
}

func (c *AgentConfig) validate() error {
	var errs []error
	if c.Node == "" {
		errs = append(errs, errors.New("--node (or $NODE_NAME) is required"))
	}
	if c.StateDir == "" {
		errs = append(errs, errors.New("--state-dir is required: a writable folder for the checkpoints"))
	}
	if c.LinesPerSecond <= 0 || c.LineBurst < 1 {
		errs = append(errs, fmt.Errorf("--log-rate (%g) must be above 0 and --log-burst (%d) at least 1", c.LinesPerSecond, c.LineBurst))
	}
	if c.BytesPerSecond <= 0 || c.ByteBurst < 1 {
		errs = append(errs, fmt.Errorf("--log-bytes-rate (%d) must be above 0 and --log-bytes-burst (%d) at least 1", c.BytesPerSecond, c.ByteBurst))
	}
	if c.Loggregator.Addr == "" {
		errs = append(errs, errors.New("--loggregator-addr is required"))
	} else if _, _, err := net.SplitHostPort(c.Loggregator.Addr); err != nil {
		errs = append(errs, fmt.Errorf("--loggregator-addr %q is not HOST:PORT", c.Loggregator.Addr))
	}
	for _, file := range [...]struct{ flagName, path string }{
		{"--loggregator-ca", c.Loggregator.CAFile}, {"--loggregator-cert", c.Loggregator.CertFile}, {"--loggregator-key", c.Loggregator.KeyFile},
	} {
		flagName, path := file.flagName, file.path
		if path == "" {
			errs = append(errs, fmt.Errorf("%s is required (Loggregator's ingress takes mutual TLS only)", flagName))
		} else if _, err := os.Stat(path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", flagName, err))
		}
	}
	if k := c.Kubelet; k.URL != "" {
		if u, err := url.Parse(k.URL); err != nil || u.Scheme != "https" || u.Host == "" {
			errs = append(errs, fmt.Errorf("--kubelet-url %q is not https://HOST:PORT", k.URL))
		}
		if k.CAFile == "" {
			errs = append(errs, errors.New("--kubelet-ca is required with --kubelet-url (or $NODE_IP)"))
		}
		for _, file := range [...]struct{ flagName, path string }{{"--kubelet-ca", k.CAFile}, {"--kubelet-token-file", k.TokenFile}} {
			flagName, path := file.flagName, file.path
			if path == "" {
				continue
			}
			if _, err := os.Stat(path); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", flagName, err))
			}
		}
	}
	if i := c.Kubelet.Interval; i < agent.MinMetricsInterval || i > agent.MaxMetricsInterval {
		errs = append(errs, fmt.Errorf("--metrics-interval %s is not within %s and %s", i, agent.MinMetricsInterval, agent.MaxMetricsInterval))
	}
	if c.OpsListen != "" {
		if _, _, err := net.SplitHostPort(c.OpsListen); err != nil {
			errs = append(errs, fmt.Errorf("--ops-listen %q is not [HOST]:PORT", c.OpsListen))
		}
	}
	if c.Workload != agent.WorkloadDeployments && c.Workload != agent.WorkloadStatefulSets {
		errs = append(errs, fmt.Errorf("--backend %q is neither deployments nor statefulsets", c.Workload))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.Config.Validate()
}

// runAgent runs `opi agent` until ctx ends.
func runAgent(ctx context.Context, cfg AgentConfig) error {
	logger, err := cli.NewLogger(os.Stdout, cfg.LogLevel)
	if err != nil {
		return err
	}
	cli.ReleaseStartupPages(logger, "package-initialisation")
	restConfig, err := cli.KubeConfig(cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubernetes config: %w", err)
	}
	restConfig.UserAgent = "opi-agent"
	restConfig.ContentType = "application/vnd.kubernetes.protobuf"
	restConfig.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	src, err := restsources.New(restConfig, cfg.Namespace)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	a, err := agent.New(cfg.Config, src, logger)
	if err != nil {
		return err
	}
	if cfg.OpsListen != "" {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		_, done, err := startAgentOps(ctx, cfg.OpsListen, a.OpsHandler(), logger)
		if err != nil {
			return err
		}
		defer func() { cancel(); <-done }()
	}
	return a.Run(ctx)
}
