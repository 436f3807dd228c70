package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/cc"
	"github.com/opi-bridge/opi/handler"
	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// Config is opi's configuration: a YAML file (--config) whose keys flags override.
type Config struct {
	// Listen is the address of the OPI API.
	Listen string `json:"listen"`
	// KubernetesConfig is the backend's section, `kubernetes:` in the file. It is embedded so
	// that its fields read as cfg.Namespace and so on; its JSON name nests it in the file.
	KubernetesConfig `json:"kubernetes"`
	// MaxBodyBytes bounds request bodies (413 beyond it).
	MaxBodyBytes int64 `json:"max_body_bytes"`
	// MaxInFlight bounds the requests with a body handled at once, counted in requests of
	// MaxBodyBytes (smaller ones by their size); beyond it 503 with Retry-After.
	MaxInFlight int `json:"max_in_flight"`
	// ShutdownTimeout bounds how long in-flight requests may finish after SIGTERM.
	ShutdownTimeout Duration `json:"shutdown_timeout"`
	// WriteTimeout bounds a write's Kubernetes calls; past it the write answers 503.
	WriteTimeout Duration `json:"write_timeout"`
	// LogLevel is debug, info, error or fatal.
	LogLevel string `json:"log_level"`
	// TLSCert and TLSKey are the server's certificate and key (PEM). With them opi serves TLS 1.2+.
	TLSCert string `json:"tls_cert"`
	TLSKey  string `json:"tls_key"`
	// TLSClientCA, when set, makes opi require client certificates signed by it (mutual TLS, as
	// CC's opi.client_cert_file / client_key_file / ca_file expect).
	TLSClientCA string `json:"tls_client_ca"`
	// TLSClientNames, when set, are the only client certificates opi accepts of those
	// TLSClientCA signed: a certificate's subject CN or one of its DNS SANs must be in the list
	// (CC's, e.g. "cloud-controller"), or the handshake fails. Empty: any certificate of that CA
	// (with CF's shared internal CA, every CF component): refused off loopback unless
	// InsecureAnyClientCertificate, and warned about at start-up.
	TLSClientNames []string `json:"tls_client_names"`
	// InsecureAnyClientCertificate lets opi listen on a non-loopback address with TLSClientCA
	// but no TLSClientNames, so that any certificate the CA signed may drive opi. Without it
	// such a listen is refused at start-up.
	InsecureAnyClientCertificate bool `json:"insecure_any_client_certificate"`
	// InsecureSkipClientCertificates lets opi listen on a non-loopback address without
	// TLSClientCA, so that anyone who reaches the port may drive opi. Without it such a listen is
	// refused at start-up (Plaintext does not imply it).
	InsecureSkipClientCertificates bool `json:"insecure_skip_client_certificates"`
	// Plaintext allows serving without TLS on a non-loopback address.
	Plaintext bool `json:"plaintext"`
	// OpsListen, when set, is the operations listener's address: plain HTTP serving /healthz,
	// /readyz, /metrics and /openapi.json (and pprof with Pprof), for kubelet probes and
	// Prometheus, which have no client certificate for the API's mutual TLS.
	OpsListen string `json:"ops_listen"`
	// Pprof serves Go's profiles under /debug/pprof/ on the operations listener.
	Pprof bool `json:"pprof"`

	// Backend is the Kubernetes object that runs each app's instances: "deployments" (default)
	// or "statefulsets" (a stable CF_INSTANCE_INDEX per instance; docs/adr/0007).
	Backend string `json:"backend"`

	// CC is how opi reaches Cloud Controller's internal API for callbacks.
	CC CCConfig `json:"cc"`
	// LeaderElection decides which replica does the background work (janitor, reporters).
	LeaderElection LeaderElectionConfig `json:"leader_election"`
	// Workloads is how every app's pods are specified.
	Workloads WorkloadsConfig `json:"workloads"`

	// TaskDefaults are a task's resources when its request names none (memory: unless its
	// environment has MEMORY_LIMIT).
	TaskDefaults TaskDefaultsConfig `json:"task_defaults"`
	// TaskRetention is how long a task's Job is kept after CC accepted its end (0: at once).
	TaskRetention Duration `json:"task_retention"`

	// Staging is how docker staging reads images (bounds, registry addresses).
	Staging StagingConfig `json:"staging"`

	// NATS is how opi reaches the foundation's gorouters (kubernetes.routing: nats).
	NATS NATSConfig `json:"nats"`

	// Loggregator is where the leader sends the lifecycle lines (none: no lines).
	Loggregator LoggregatorConfig `json:"loggregator"`
}

// TaskDefaultsConfig is the `task_defaults` section.
type TaskDefaultsConfig struct {
	MemoryMB  int64 `json:"memory_mb"`
	DiskMB    int64 `json:"disk_mb"`
	CPUWeight int32 `json:"cpu_weight"`
}

// WorkloadsConfig is the `workloads` section: what opi puts into every app's pods.
type WorkloadsConfig struct {
	// ProbeTimeout bounds each single health check (default 1s, as Diego). CC's
	// health_check_timeout_ms is the start timeout, which this does not change.
	ProbeTimeout Duration `json:"probe_timeout"`
	// MinReady is how long a new instance must stay Ready before a rollout counts it
	// as available (default 10s). For "process" and "none" health checks it is the only signal.
	MinReady Duration `json:"min_ready"`
	// PodSecurity is "baseline" (default: images run as built, with Diego's default
	// capabilities) or "restricted" (non-root, all capabilities dropped), for namespaces that
	// enforce the restricted Pod Security Standard.
	PodSecurity string `json:"pod_security"`
}

// KubernetesConfig is the `kubernetes` section: the Kubernetes backend's settings.
type KubernetesConfig struct {
	// Kubeconfig is the cluster to run apps on; else $KUBECONFIG, else in-cluster config.
	Kubeconfig string `json:"kubeconfig"`
	// Namespace is where apps run.
	Namespace string `json:"namespace"`
	// CreateNamespace lets opi create Namespace when it is missing.
	CreateNamespace bool `json:"create_namespace"`
	// KubeQPS and KubeBurst rate-limit opi's own API server requests.
	KubeQPS   float32 `json:"kube_qps"`
	KubeBurst int     `json:"kube_burst"`
	// ReadWaitTimeout bounds how long a write waits for opi's cache to reflect it.
	ReadWaitTimeout Duration `json:"read_wait_timeout"`
	// JanitorPeriod is how often leftovers of desires that never completed are looked for
	// (0 disables the janitor); JanitorGrace is how old they must be to be deleted.
	JanitorPeriod Duration `json:"janitor_period"`
	JanitorGrace  Duration `json:"janitor_grace"`
	// CacheSyncTimeout is how long opi waits for its caches at start-up before it logs
	// cache-sync-slow (and again every 30 s after). It does not stop opi: until synced it
	// answers 503 and is not ready; only a LIST it is forbidden ends it.
	CacheSyncTimeout Duration `json:"cache_sync_timeout"`
	// AppNetworkConfig (routing, network policies, placement, service shape) is inlined: its
	// keys sit in the kubernetes section.
	AppNetworkConfig
	// UserAnnotationPrefixes are the prefixes a key of CC's user_defined_annotations must
	// start with (unset: bifrost.DefaultUserAnnotationPrefixes, "prometheus.io/"; empty: none
	// allowed); other keys are refused with 400.
	UserAnnotationPrefixes []string `json:"user_annotation_prefixes"`
	// TaskDefaultEgressRules are the egress rules (CC's egress_rules shape) of a task whose app
	// has no LRP (unset: none, DNS only); a task of an app with an LRP gets the LRP's rules.
	TaskDefaultEgressRules []json.RawMessage `json:"task_default_egress_rules"`
}

// CCConfig is the `cc` section: Cloud Controller's internal API, where opi sends task
// completions, staging results and crash reports. Task and staging callbacks go to the URL CC
// gives in each request; crash reports to <internal_url>/internal/v4/apps/<process guid>/crashed.
type CCConfig struct {
	// InternalURL is CC's internal API base, e.g. https://cloud-controller-ng.service.cf.internal:9023.
	InternalURL string `json:"internal_url"`
	// ClientCert and ClientKey (PEM) are opi's client certificate for CC's mutual TLS; CA (PEM)
	// signed CC's server certificate.
	ClientCert string `json:"client_cert"`
	ClientKey  string `json:"client_key"`
	CA         string `json:"ca"`
	// Plaintext allows plain http:// callbacks to hosts that are not loopback (CC in the cluster).
	Plaintext bool `json:"plaintext"`
	// DeliveryBound is how long a callback CC does not accept (network errors, 5xx) is retried.
	DeliveryBound Duration `json:"delivery_bound"`
	// CallbackURLs are the endpoints (scheme, host, port) task and staging callbacks may go to
	// besides InternalURL's. A request whose completion_callback is none of them is refused
	// with 400; with neither set every task and staging request is.
	CallbackURLs []string `json:"callback_urls"`
	// MaxDeliveriesPerEndpoint bounds the callbacks in delivery to one endpoint at once, so a
	// slow endpoint holds no more of the reporters' workers (default cc.DefaultMaxPerEndpoint).
	MaxDeliveriesPerEndpoint int `json:"max_deliveries_per_endpoint"`
}

// LeaderElectionConfig is the `leader_election` section. With several replicas of opi, exactly
// one (the holder of a Lease in the apps' namespace) runs the janitor and the reporters; every
// replica serves the API.
type LeaderElectionConfig struct {
	// Enabled: default true. Without it every replica runs the background work.
	Enabled bool `json:"enabled"`
	// LeaseName is the Lease's name (default "opi-leader").
	LeaseName string `json:"lease_name"`
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's leader election timings.
	LeaseDuration Duration `json:"lease_duration"`
	RenewDeadline Duration `json:"renew_deadline"`
	RetryPeriod   Duration `json:"retry_period"`
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

// String is the flag form of d ("5s").
func (d *Duration) String() string { return d.Duration.String() }

// Set parses a flag's value ("5s").
func (d *Duration) Set(s string) error {
	parsed, err := time.ParseDuration(s)
	d.Duration = parsed
	return err
}

// DefaultConfig is what opi runs with when nothing is configured.
func DefaultConfig() Config {
	return Config{
		Listen: "127.0.0.1:8085",
		KubernetesConfig: KubernetesConfig{
			Namespace:       "cf-workloads",
			CreateNamespace: true,
			// client-go's own 5 QPS / 10 burst would throttle CC's 50 concurrent workers.
			KubeQPS:          200,
			KubeBurst:        400,
			ReadWaitTimeout:  Duration{k8s.DefaultReadWaitTimeout},
			JanitorPeriod:    Duration{k8s.DefaultJanitorPeriod},
			JanitorGrace:     Duration{k8s.DefaultJanitorGrace},
			CacheSyncTimeout: Duration{k8s.DefaultCacheSyncTimeout},
			AppNetworkConfig: defaultAppNetworkConfig(),
		},
		MaxBodyBytes:    handler.DefaultMaxBodyBytes,
		MaxInFlight:     handler.DefaultMaxInFlight,
		ShutdownTimeout: Duration{15 * time.Second},
		WriteTimeout:    Duration{handler.DefaultWriteTimeout},
		LogLevel:        "info",
		Backend:         k8s.Deployments,
		CC:              CCConfig{DeliveryBound: Duration{cc.DefaultDeliveryBound}, MaxDeliveriesPerEndpoint: cc.DefaultMaxPerEndpoint},
		Workloads: WorkloadsConfig{
			ProbeTimeout: Duration{k8s.DefaultProbeTimeout},
			MinReady:     Duration{k8s.DefaultMinReady},
			PodSecurity:  k8s.PodSecurityBaseline,
		},
		TaskDefaults: TaskDefaultsConfig{
			MemoryMB:  bifrost.DefaultTaskDefaults.MemoryMB,
			DiskMB:    bifrost.DefaultTaskDefaults.DiskMB,
			CPUWeight: bifrost.DefaultTaskDefaults.CPUWeight,
		},
		TaskRetention: Duration{2 * time.Minute},
		Staging:       defaultStagingConfig(),
		LeaderElection: LeaderElectionConfig{
			Enabled:       true,
			LeaseName:     "opi-leader",
			LeaseDuration: Duration{15 * time.Second},
			RenewDeadline: Duration{10 * time.Second},
			RetryPeriod:   Duration{2 * time.Second},
		},
	}
}

// LoadConfig reads args of `opi connect`: defaults, then the config file, then flags.
func LoadConfig(args []string) (Config, error) {
	cfg, err := loadLayered(args, DefaultConfig, parseFlags)
	if err != nil {
		return cfg, err
	}
	if cfg.Kubeconfig == "" {
		cfg.Kubeconfig = os.Getenv("KUBECONFIG")
	}
	return cfg, cfg.Validate()
}

// loadLayered reads a command's configuration: its defaults, then the YAML file the --config
// flag names, then the other flags, which win over the file. parse binds the flags to a
// configuration's fields and returns the --config path.
func loadLayered[T any](args []string, defaults func() T, parse func([]string, *T) (string, error)) (T, error) {
	cfg := defaults()
	configPath, err := parse(args, &cfg)
	if err != nil || configPath == "" {
		return cfg, err
	}
	cfg = defaults()
	data, err := os.ReadFile(configPath)
	if err != nil {
		return cfg, fmt.Errorf("read config: %w", err)
	}
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return cfg, fmt.Errorf("parse config %s: %w", configPath, err)
	}
	_, err = parse(args, &cfg)
	return cfg, err
}

// parseFlags sets the fields of cfg that args name and returns the --config path. Each flag is
// bound to its field, so a flag not given leaves the field as it was.
func parseFlags(args []string, cfg *Config) (configPath string, err error) {
	fs := flag.NewFlagSet("opi connect", flag.ContinueOnError)
	fs.StringVar(&configPath, "config", "", "YAML config file")
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "address to serve the OPI API on")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", cfg.Kubeconfig, "kubeconfig of the cluster (default $KUBECONFIG, else in-cluster)")
	fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "namespace apps run in")
	fs.BoolVar(&cfg.CreateNamespace, "create-namespace", cfg.CreateNamespace, "create the namespace when missing")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", cfg.MaxBodyBytes, "largest request body accepted")
	fs.IntVar(&cfg.MaxInFlight, "max-in-flight", cfg.MaxInFlight, "requests with a body handled at once, counted in maximal ones (smaller ones by their size); beyond it 503")
	fs.Var((*float32Value)(&cfg.KubeQPS), "kube-qps", "API server requests per second")
	fs.IntVar(&cfg.KubeBurst, "kube-burst", cfg.KubeBurst, "API server request burst")
	fs.Var(&cfg.ReadWaitTimeout, "read-wait-timeout", "how long a write waits for the cache to reflect it")
	fs.Var(&cfg.ShutdownTimeout, "shutdown-timeout", "how long in-flight requests may finish on SIGTERM")
	fs.Var(&cfg.WriteTimeout, "write-timeout", "how long a write may wait for Kubernetes before answering 503")
	fs.Var(&cfg.JanitorPeriod, "janitor-period", "how often leftovers of interrupted desires are cleaned up (0: never)")
	fs.Var(&cfg.JanitorGrace, "janitor-grace", "how old a leftover must be to be deleted")
	fs.Var(&cfg.CacheSyncTimeout, "cache-sync-timeout", "how long start-up waits for the caches before it logs cache-sync-slow (opi keeps waiting, not ready)")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, error or fatal")
	fs.StringVar(&cfg.TLSCert, "tls-cert", cfg.TLSCert, "server certificate (PEM); serve TLS")
	fs.StringVar(&cfg.TLSKey, "tls-key", cfg.TLSKey, "server private key (PEM)")
	fs.StringVar(&cfg.TLSClientCA, "tls-client-ca", cfg.TLSClientCA, "CA (PEM) that client certificates must be signed by (mutual TLS)")
	fs.Var((*stringList)(&cfg.TLSClientNames), "tls-client-names", "comma-separated names (CN or DNS SAN) of the only client certificates accepted (default: any the client CA signed)")
	fs.BoolVar(&cfg.InsecureAnyClientCertificate, "insecure-any-client-certificate", cfg.InsecureAnyClientCertificate, "allow a non-loopback listen with --tls-client-ca but no --tls-client-names: any certificate the CA signed may drive opi")
	fs.BoolVar(&cfg.InsecureSkipClientCertificates, "insecure-skip-client-certificates", cfg.InsecureSkipClientCertificates, "allow a non-loopback listen without --tls-client-ca: anyone who reaches it may drive opi")
	fs.BoolVar(&cfg.Plaintext, "plaintext", cfg.Plaintext, "allow plain HTTP on a non-loopback address")
	fs.StringVar(&cfg.OpsListen, "ops-listen", cfg.OpsListen, "address of the plaintext operations listener (/healthz, /readyz, /metrics)")
	fs.BoolVar(&cfg.Pprof, "pprof", cfg.Pprof, "serve Go's pprof profiles on the operations listener")
	cfg.CC.bindFlags(fs)
	cfg.Workloads.bindFlags(fs)
	fs.StringVar(&cfg.Backend, "backend", cfg.Backend, "what runs each app's instances: deployments or statefulsets (stable CF_INSTANCE_INDEX)")
	cfg.LeaderElection.bindFlags(fs)
	fs.Var(&cfg.TaskRetention, "task-retention", "how long a task's Job is kept after Cloud Controller accepted its end (0: at once)")
	cfg.AppNetworkConfig.bindFlags(fs)
	cfg.Staging.bindFlags(fs)
	cfg.NATS.bindFlags(fs)
	cfg.Loggregator.bindFlags(fs)
	fs.Func("user-annotation-prefixes", "comma-separated prefixes a user annotation key must start with (default prometheus.io/; empty: none allowed)", func(s string) error {
		cfg.UserAnnotationPrefixes = []string{}
		if s != "" {
			cfg.UserAnnotationPrefixes = strings.Split(s, ",")
		}
		return nil
	})
	fs.Func("task-default-egress-rules", "JSON list of egress rules (CC's egress_rules shape) for tasks whose app has no LRP (default none: DNS only)", func(s string) error {
		return json.Unmarshal([]byte(s), &cfg.TaskDefaultEgressRules)
	})
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if fs.NArg() > 0 {
		return "", fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	return configPath, nil
}

// bindFlags binds the cc section's flags.
func (c *CCConfig) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.InternalURL, "cc-internal-url", c.InternalURL, "Cloud Controller's internal API base URL (crash reports)")
	fs.StringVar(&c.ClientCert, "cc-client-cert", c.ClientCert, "client certificate (PEM) for Cloud Controller's mutual TLS")
	fs.StringVar(&c.ClientKey, "cc-client-key", c.ClientKey, "client key (PEM) for Cloud Controller's mutual TLS")
	fs.StringVar(&c.CA, "cc-ca", c.CA, "CA (PEM) of Cloud Controller's server certificate")
	fs.BoolVar(&c.Plaintext, "cc-plaintext", c.Plaintext, "allow plain http callbacks to hosts that are not loopback")
	fs.Var(&c.DeliveryBound, "cc-delivery-bound", "how long a callback Cloud Controller does not accept is retried")
	fs.Var(&urlList{urls: &c.CallbackURLs}, "cc-callback-url", "an endpoint (scheme://host:port) task and staging callbacks may go to besides --cc-internal-url's; repeatable, or comma-separated")
	fs.IntVar(&c.MaxDeliveriesPerEndpoint, "cc-max-deliveries-per-endpoint", c.MaxDeliveriesPerEndpoint, "how many callbacks may be in delivery to one endpoint at once")
}

// bindFlags binds the workloads section's flags.
func (c *WorkloadsConfig) bindFlags(fs *flag.FlagSet) {
	fs.Var(&c.ProbeTimeout, "probe-timeout", "how long each single health check of an instance may take")
	fs.Var(&c.MinReady, "min-ready", "how long a new instance must stay Ready before a rollout counts it")
	fs.StringVar(&c.PodSecurity, "pod-security", c.PodSecurity, "baseline or restricted (for namespaces enforcing the restricted Pod Security Standard)")
}

// bindFlags binds the leader_election section's flags.
func (c *LeaderElectionConfig) bindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&c.Enabled, "leader-election", c.Enabled, "run the janitor and reporters only on the replica holding the leader Lease")
	fs.Var(&c.LeaseDuration, "leader-lease-duration", "how long a leader's Lease lasts without renewal")
	fs.Var(&c.RenewDeadline, "leader-renew-deadline", "how long the leader keeps trying to renew before it gives up leading")
	fs.Var(&c.RetryPeriod, "leader-retry-period", "how often replicas try to take or renew the Lease")
}

// float32Value is a float32 flag.
type float32Value float32

func (f *float32Value) String() string { return strconv.FormatFloat(float64(*f), 'g', -1, 32) }

// Set parses a flag's value.
func (f *float32Value) Set(s string) error {
	v, err := strconv.ParseFloat(s, 32)
	*f = float32Value(v)
	return err
}

// stringList is a comma-separated list flag; a flag given replaces the list (the file's too).
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

// Set parses a flag's value ("a,b"); empty names are dropped.
func (l *stringList) Set(s string) error {
	*l = nil
	for _, name := range strings.Split(s, ",") {
		if name = strings.TrimSpace(name); name != "" {
			*l = append(*l, name)
		}
	}
	return nil
}

// Validate reports the first configuration mistake.
func (c Config) Validate() error {
	if err := c.validateListen(); err != nil {
		return err
	}
	if c.Namespace == "" {
		return fmt.Errorf("kubernetes.namespace must not be empty")
	}
	if c.MaxBodyBytes <= 0 {
		return fmt.Errorf("max_body_bytes must be positive")
	}
	if c.MaxInFlight <= 0 {
		return fmt.Errorf("max_in_flight must be positive")
	}
	if c.KubeQPS <= 0 || c.KubeBurst <= 0 {
		return fmt.Errorf("kubernetes.kube_qps and kubernetes.kube_burst must be positive")
	}
	if c.WriteTimeout.Duration <= 0 {
		return fmt.Errorf("write_timeout must be positive")
	}
	if c.JanitorPeriod.Duration < 0 || c.JanitorGrace.Duration <= 0 {
		return fmt.Errorf("kubernetes.janitor_period must not be negative and kubernetes.janitor_grace must be positive")
	}
	if c.CacheSyncTimeout.Duration <= 0 {
		return fmt.Errorf("kubernetes.cache_sync_timeout must be positive")
	}
	if err := c.CC.validate(); err != nil {
		return err
	}
	if err := c.validateTasks(); err != nil {
		return err
	}
	if err := c.LeaderElection.validate(); err != nil {
		return err
	}
	if err := c.AppNetworkConfig.validate(); err != nil {
		return err
	}
	if err := c.Staging.validate(); err != nil {
		return err
	}
	if err := c.NATS.validate(c.Routing); err != nil {
		return err
	}
	if err := c.Loggregator.validate(); err != nil {
		return err
	}
	for i, p := range c.UserAnnotationPrefixes {
		if p == "" || strings.HasPrefix(names.ReservedAnnotationPrefix, p) || strings.HasPrefix(p, names.ReservedAnnotationPrefix) {
			return fmt.Errorf("kubernetes.user_annotation_prefixes[%d] %q must be a non-empty prefix that does not cover opi's own %q annotations", i, p, names.ReservedAnnotationPrefix)
		}
	}
	if _, err := c.taskDefaultEgress(); err != nil {
		return err
	}
	if w := c.Workloads; w.ProbeTimeout.Duration <= 0 || w.MinReady.Duration < 0 {
		return fmt.Errorf("workloads.probe_timeout must be positive and workloads.min_ready not negative")
	}
	switch c.Backend {
	case k8s.Deployments, k8s.StatefulSets:
	default:
		return fmt.Errorf("backend %q is not one of %s, %s", c.Backend, k8s.Deployments, k8s.StatefulSets)
	}
	if err := c.backendOptions().Validate(); err != nil {
		return fmt.Errorf("workloads: %w", err)
	}
	switch c.LogLevel {
	case "debug", "info", "error", "fatal":
	default:
		return fmt.Errorf("log_level %q is not one of debug, info, error, fatal", c.LogLevel)
	}
	return nil
}

// validateListen checks where and how opi serves: the listen addresses, and TLS and client
// certificates, which an address off loopback requires unless the operator opts out.
func (c Config) validateListen() error {
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("listen %q: %w", c.Listen, err)
	}
	if c.OpsListen != "" {
		if _, _, err := net.SplitHostPort(c.OpsListen); err != nil {
			return fmt.Errorf("ops_listen %q: %w", c.OpsListen, err)
		}
	}
	if c.Pprof && c.OpsListen == "" {
		return fmt.Errorf("pprof needs ops_listen: profiles are served on the operations listener")
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("tls_cert and tls_key go together")
	}
	if c.TLSClientCA != "" && c.TLSCert == "" {
		return fmt.Errorf("tls_client_ca needs tls_cert and tls_key")
	}
	if c.TLSCert == "" && !c.Plaintext && !cc.IsLoopback(host) {
		return fmt.Errorf("refusing to serve plain HTTP on %s: give --tls-cert and --tls-key (and --tls-client-ca for mutual TLS), listen on a loopback address, or opt in with --plaintext", c.Listen)
	}
	if c.TLSClientCA == "" && !c.InsecureSkipClientCertificates && !cc.IsLoopback(host) {
		return fmt.Errorf("refusing to serve on %s without client certificates: give tls_client_ca (--tls-client-ca, mutual TLS with CC), listen on a loopback address, or opt out with insecure_skip_client_certificates: true (--insecure-skip-client-certificates)", c.Listen)
	}
	if c.TLSClientCA != "" && len(c.TLSClientNames) == 0 && !c.InsecureAnyClientCertificate && !cc.IsLoopback(host) {
		return fmt.Errorf("refusing to serve on %s to any certificate the client CA signed: name CC's certificate in tls_client_names (--tls-client-names), listen on a loopback address, or opt out with insecure_any_client_certificate: true (--insecure-any-client-certificate)", c.Listen)
	}
	if len(c.TLSClientNames) > 0 && c.TLSClientCA == "" {
		return fmt.Errorf("tls_client_names needs tls_client_ca: names are checked on client certificates")
	}
	for _, name := range c.TLSClientNames {
		if name == "" {
			return fmt.Errorf("tls_client_names must not hold an empty name")
		}
	}
	return nil
}

// validate checks the cc section.
func (c CCConfig) validate() error {
	if (c.ClientCert == "") != (c.ClientKey == "") {
		return fmt.Errorf("cc.client_cert and cc.client_key go together")
	}
	if c.DeliveryBound.Duration <= 0 {
		return fmt.Errorf("cc.delivery_bound must be positive")
	}
	return c.validateCallbacks()
}

// validateTasks checks the tasks' defaults and retention.
func (c Config) validateTasks() error {
	if d := c.TaskDefaults; d.MemoryMB < 1 || d.MemoryMB > bifrost.MaxMemoryMB || d.DiskMB < 0 || d.DiskMB > bifrost.MaxDiskMB || d.CPUWeight < 0 || d.CPUWeight > bifrost.MaxCPUWeight {
		return fmt.Errorf("task_defaults: memory_mb must be 1..%d, disk_mb 0..%d, cpu_weight 0..%d", bifrost.MaxMemoryMB, bifrost.MaxDiskMB, bifrost.MaxCPUWeight)
	}
	if c.TaskRetention.Duration < 0 {
		return fmt.Errorf("task_retention must not be negative")
	}
	return nil
}

// validate checks the leader_election section (its timings only when it is enabled).
func (le LeaderElectionConfig) validate() error {
	if !le.Enabled {
		return nil
	}
	if le.LeaseName == "" {
		return fmt.Errorf("leader_election.lease_name must not be empty")
	}
	if le.RetryPeriod.Duration <= 0 || le.RenewDeadline.Duration <= le.RetryPeriod.Duration || le.LeaseDuration.Duration <= le.RenewDeadline.Duration {
		return fmt.Errorf("leader_election needs 0 < retry_period < renew_deadline < lease_duration")
	}
	return nil
}

// backendOptions are the Kubernetes backend's options from the configuration.
func (c Config) backendOptions() k8s.Options {
	opts := k8s.Options{
		Namespace:        c.Namespace,
		CacheSyncTimeout: c.CacheSyncTimeout.Duration,
		Workload:         c.Backend,
		Store:            k8s.StoreOptions{ReadWaitTimeout: c.ReadWaitTimeout.Duration},
		Pods: k8s.PodOptions{
			ProbeTimeout: c.Workloads.ProbeTimeout.Duration,
			// 0 would mean the backend's default: an operator's 0 asks for none.
			MinReady:    cmp.Or(c.Workloads.MinReady.Duration, -1),
			PodSecurity: c.Workloads.PodSecurity,
		},
		Janitor: k8s.JanitorOptions{Period: c.JanitorPeriod.Duration, Grace: c.JanitorGrace.Duration},
		Tasks:   k8s.TaskOptions{Retention: c.TaskRetention.Duration},
	}
	c.AppNetworkConfig.applyTo(&opts)
	opts.Hooks.NetworkPolicy.TaskDefaultEgress, _ = c.taskDefaultEgress() // checked by Validate
	return opts
}

// taskDefaultEgress is kubernetes.task_default_egress_rules read as CC's egress_rules are.
func (c Config) taskDefaultEgress() ([]opi.EgressRule, error) {
	if len(c.TaskDefaultEgressRules) == 0 {
		return nil, nil
	}
	rules, err := bifrost.ConvertEgressRules(c.TaskDefaultEgressRules)
	if err != nil {
		return nil, fmt.Errorf("kubernetes.task_default_egress_rules: %w", err)
	}
	for i, r := range rules {
		if r.Protocol == opi.ProtocolICMP {
			return nil, fmt.Errorf("kubernetes.task_default_egress_rules[%d]: icmp rules cannot be kept: NetworkPolicies filter tcp, udp and sctp only", i)
		}
	}
	return rules, nil
}
