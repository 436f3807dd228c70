package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"sigs.k8s.io/yaml"
)

// Config is opi's configuration: a YAML file (--config) whose keys flags override.
type Config struct {
	// Listen is the address of the OPI API.
	Listen string `json:"listen"`
	// Kubeconfig is the cluster to run apps on; else $KUBECONFIG, else in-cluster config.
	Kubeconfig string `json:"kubeconfig"`
	// Namespace is where apps run.
	Namespace string `json:"namespace"`
	// CreateNamespace lets opi create Namespace when it is missing.
	CreateNamespace bool `json:"create_namespace"`
	// MaxBodyBytes bounds request bodies (413 beyond it).
	MaxBodyBytes int64 `json:"max_body_bytes"`
	// KubeQPS and KubeBurst rate-limit opi's own API server requests.
	KubeQPS   float32 `json:"kube_qps"`
	KubeBurst int     `json:"kube_burst"`
	// ReadWaitTimeout bounds how long a write waits for opi's cache to reflect it.
	ReadWaitTimeout Duration `json:"read_wait_timeout"`
	// ShutdownTimeout bounds how long in-flight requests may finish after SIGTERM.
	ShutdownTimeout Duration `json:"shutdown_timeout"`
	// WriteTimeout bounds a write's Kubernetes calls; past it the write answers 503.
	WriteTimeout Duration `json:"write_timeout"`
	// JanitorPeriod is how often leftovers of desires that never completed are looked for
	// (0 disables the janitor); JanitorGrace is how old they must be to be deleted.
	JanitorPeriod Duration `json:"janitor_period"`
	JanitorGrace  Duration `json:"janitor_grace"`
	// LogLevel is debug, info, error or fatal.
	LogLevel string `json:"log_level"`
	// TLSCert and TLSKey are the server's certificate and key (PEM). With them opi serves TLS 1.2+.
	TLSCert string `json:"tls_cert"`
	TLSKey  string `json:"tls_key"`
	// TLSClientCA, when set, makes opi require client certificates signed by it (mutual TLS, as
	// CC's opi.client_cert_file / client_key_file / ca_file expect).
	TLSClientCA string `json:"tls_client_ca"`
	// Plaintext allows serving without TLS on a non-loopback address.
	Plaintext bool `json:"plaintext"`
	// DebugListen, when set, serves Go's pprof profiles there (a loopback address only).
	DebugListen string `json:"debug_listen"`
}

// Duration is a time.Duration written as "5s" in YAML.
type Duration struct{ time.Duration }

// UnmarshalJSON reads "5s"-style durations.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := yaml.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"5s\": %w", err)
	}
	parsed, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = parsed
	return nil
}

// DefaultConfig is what opi runs with when nothing is configured.
func DefaultConfig() Config {
	return Config{
		Listen:          "127.0.0.1:8085",
		Namespace:       "cf-workloads",
		CreateNamespace: true,
		MaxBodyBytes:    10 << 20,
		// client-go's own 5 QPS / 10 burst would throttle CC's 50 concurrent workers.
		KubeQPS:         200,
		KubeBurst:       400,
		ReadWaitTimeout: Duration{5 * time.Second},
		ShutdownTimeout: Duration{15 * time.Second},
		// Below CC's own 60 s receive timeout, above what a busy API server takes to allocate a
		// Service IP (seen: over 20 s at thousands of Services).
		WriteTimeout:  Duration{50 * time.Second},
		JanitorPeriod: Duration{time.Minute},
		JanitorGrace:  Duration{5 * time.Minute},
		LogLevel:      "info",
	}
}

// LoadConfig reads args of `opi connect`: defaults, then the config file, then flags.
func LoadConfig(args []string) (Config, error) {
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("opi connect", flag.ContinueOnError)
	configPath := fs.String("config", "", "YAML config file")
	listen := fs.String("listen", cfg.Listen, "address to serve the OPI API on")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster (default $KUBECONFIG, else in-cluster)")
	namespace := fs.String("namespace", cfg.Namespace, "namespace apps run in")
	createNS := fs.Bool("create-namespace", cfg.CreateNamespace, "create the namespace when missing")
	maxBody := fs.Int64("max-body-bytes", cfg.MaxBodyBytes, "largest request body accepted")
	qps := fs.Float64("kube-qps", float64(cfg.KubeQPS), "API server requests per second")
	burst := fs.Int("kube-burst", cfg.KubeBurst, "API server request burst")
	readWait := fs.Duration("read-wait-timeout", cfg.ReadWaitTimeout.Duration, "how long a write waits for the cache to reflect it")
	shutdown := fs.Duration("shutdown-timeout", cfg.ShutdownTimeout.Duration, "how long in-flight requests may finish on SIGTERM")
	writeTimeout := fs.Duration("write-timeout", cfg.WriteTimeout.Duration, "how long a write may wait for Kubernetes before answering 503")
	janitorPeriod := fs.Duration("janitor-period", cfg.JanitorPeriod.Duration, "how often leftovers of interrupted desires are cleaned up (0: never)")
	janitorGrace := fs.Duration("janitor-grace", cfg.JanitorGrace.Duration, "how old a leftover must be to be deleted")
	logLevel := fs.String("log-level", cfg.LogLevel, "debug, info, error or fatal")
	tlsCert := fs.String("tls-cert", "", "server certificate (PEM); serve TLS")
	tlsKey := fs.String("tls-key", "", "server private key (PEM)")
	tlsClientCA := fs.String("tls-client-ca", "", "CA (PEM) that client certificates must be signed by (mutual TLS)")
	plaintext := fs.Bool("plaintext", false, "allow plain HTTP on a non-loopback address")
	debugListen := fs.String("debug-listen", "", "serve Go's pprof profiles on this loopback address")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}

	if *configPath != "" {
		data, err := os.ReadFile(*configPath)
		if err != nil {
			return cfg, fmt.Errorf("read config: %w", err)
		}
		if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
			return cfg, fmt.Errorf("parse config %s: %w", *configPath, err)
		}
	}

	// Flags given on the command line win over the file.
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "listen":
			cfg.Listen = *listen
		case "kubeconfig":
			cfg.Kubeconfig = *kubeconfig
		case "namespace":
			cfg.Namespace = *namespace
		case "create-namespace":
			cfg.CreateNamespace = *createNS
		case "max-body-bytes":
			cfg.MaxBodyBytes = *maxBody
		case "kube-qps":
			cfg.KubeQPS = float32(*qps)
		case "kube-burst":
			cfg.KubeBurst = *burst
		case "read-wait-timeout":
			cfg.ReadWaitTimeout.Duration = *readWait
		case "shutdown-timeout":
			cfg.ShutdownTimeout.Duration = *shutdown
		case "write-timeout":
			cfg.WriteTimeout.Duration = *writeTimeout
		case "janitor-period":
			cfg.JanitorPeriod.Duration = *janitorPeriod
		case "janitor-grace":
			cfg.JanitorGrace.Duration = *janitorGrace
		case "log-level":
			cfg.LogLevel = *logLevel
		case "tls-cert":
			cfg.TLSCert = *tlsCert
		case "tls-key":
			cfg.TLSKey = *tlsKey
		case "tls-client-ca":
			cfg.TLSClientCA = *tlsClientCA
		case "plaintext":
			cfg.Plaintext = *plaintext
		case "debug-listen":
			cfg.DebugListen = *debugListen
		}
	})
	if cfg.Kubeconfig == "" {
		cfg.Kubeconfig = os.Getenv("KUBECONFIG")
	}
	return cfg, cfg.Validate()
}

// Validate reports the first configuration mistake.
func (c Config) Validate() error {
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("listen %q: %w", c.Listen, err)
	}
	if c.DebugListen != "" {
		debugHost, _, err := net.SplitHostPort(c.DebugListen)
		if err != nil || !isLoopback(debugHost) {
			return fmt.Errorf("debug_listen %q must be a loopback address", c.DebugListen)
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("tls_cert and tls_key go together")
	}
	if c.TLSClientCA != "" && c.TLSCert == "" {
		return fmt.Errorf("tls_client_ca needs tls_cert and tls_key")
	}
	if c.TLSCert == "" && !c.Plaintext && !isLoopback(host) {
		return fmt.Errorf("refusing to serve plain HTTP on %s: give --tls-cert and --tls-key (and --tls-client-ca for mutual TLS), listen on a loopback address, or opt in with --plaintext", c.Listen)
	}
	if c.Namespace == "" {
		return fmt.Errorf("namespace must not be empty")
	}
	if c.MaxBodyBytes <= 0 {
		return fmt.Errorf("max_body_bytes must be positive")
	}
	if c.KubeQPS <= 0 || c.KubeBurst <= 0 {
		return fmt.Errorf("kube_qps and kube_burst must be positive")
	}
	if c.WriteTimeout.Duration <= 0 {
		return fmt.Errorf("write_timeout must be positive")
	}
	if c.JanitorPeriod.Duration < 0 || c.JanitorGrace.Duration <= 0 {
		return fmt.Errorf("janitor_period must not be negative and janitor_grace must be positive")
	}
	switch c.LogLevel {
	case "debug", "info", "error", "fatal":
	default:
		return fmt.Errorf("log_level %q is not one of debug, info, error, fatal", c.LogLevel)
	}
	return nil
}

// isLoopback tells whether host (from a listen address) only accepts local connections.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
