// Command opi is the OPI server: `opi connect` serves Cloud Controller's LRP API and runs the
// apps on Kubernetes; `opi agent` ships a node's app logs; `opi ssh-proxy` is `cf ssh`'s endpoint;
// `opi relay` runs in an instance's pod for the proxy's tunnels to other hosts.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/cc"
	"github.com/opi-bridge/opi/cmd/internal/cli"
	"github.com/opi-bridge/opi/handler"
	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/apiclient"
	"github.com/opi-bridge/opi/metrics"
	"github.com/opi-bridge/opi/sshproxy"
)

// defaultGCPercent is opi's GOGC unless the environment sets one.
const defaultGCPercent = 25

const usage = `usage: opi connect [--config FILE] [--listen ADDR] [--kubeconfig PATH] [--namespace NS] [flags]
       opi agent --node NAME --state-dir DIR --loggregator-addr HOST:PORT [flags]
       opi ssh-proxy --host-key FILE --uaa-token-url URL --uaa-client-id ID --cc-api-url URL [flags]
       opi relay idle | dial [--timeout D] -- HOST PORT   (run by the SSH proxy in an instance's pod)
       opi --version

Serves Cloud Controller's OPI API and runs its apps on Kubernetes. "opi connect -h" lists the flags.
`

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Println("opi " + version())
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == "agent" {
		execAgent(os.Args[2:])
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == "ssh-proxy" {
		mainSSHProxy(os.Args[2:])
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == sshproxy.RelayCommand {
		mainRelay(os.Args[2:])
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "connect" {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	cfg, err := LoadConfig(os.Args[2:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "opi: %v\n", err)
		os.Exit(2)
	}
	if os.Getenv("GOGC") == "" {
		// opi's heap is mostly its long-lived caches: a low GC target costs little CPU and keeps
		// memory close to the live heap instead of up to twice it (seen: 60 → 53 MB RSS at
		// 1,000 apps). GOGC overrides it.
		debug.SetGCPercent(defaultGCPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := connect(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "opi: %v\n", err)
		os.Exit(1)
	}
}

// The commands' shared helpers (cmd/internal/cli), by the names this package's code uses.
const serviceAccountDir = cli.ServiceAccountDir

var (
	newLogger       = cli.NewLogger
	kubeConfig      = cli.KubeConfig
	inClusterConfig = cli.InClusterConfig
)

// connect serves the OPI API until ctx ends. Each step wires one concern; their order is that of
// their side effects (requests to the API server, logs, goroutines) and is kept on purpose.
func connect(ctx context.Context, cfg Config) error {
	logger, err := newLogger(os.Stdout, cfg.LogLevel)
	if err != nil {
		return err
	}
	cli.ReleaseStartupPages(logger, "package-initialisation")
	m := metrics.New()
	kc, err := newKubeClients(cfg.KubernetesConfig, m)
	if err != nil {
		return err
	}
	ccClient, callbacks, err := newCCClient(cfg.CC, logger)
	if err != nil {
		return err
	}
	clusterRules, err := checkCluster(ctx, cfg, kc.client, logger)
	if err != nil {
		return err
	}
	opts, err := newBackendOptions(cfg, kc, callbacks)
	if err != nil {
		return err
	}
	nodesSynced, err := wireRouting(ctx, cfg, kc, m, logger, &opts)
	if err != nil {
		return err
	}
	stopLoggregator, err := wireLoggregator(cfg.Loggregator, logger, &opts)
	if err != nil {
		return err
	}
	defer stopLoggregator()
	// NewBackend validates the options once more, with the clients and notifiers wired in: a
	// half-configured feature is refused.
	backend, err := k8s.NewBackend(kc.client, logger.Session("k8s"), opts)
	if err != nil {
		return fmt.Errorf("kubernetes backend: %w", err)
	}
	// The informers (and the janitor) live until opi has shut down, not only as long as the
	// signal: requests in flight at SIGTERM still wait on the caches.
	backendCtx, stopBackend := context.WithCancel(context.Background())
	defer stopBackend()
	synced := startCaches(backendCtx, backend)
	leader := newLeaderWork(backendCtx, cfg, kc.client, logger, func(ctx context.Context) {
		waitForNodes(ctx, nodesSynced, logger)
		backend.RunLeaderWork(ctx)
	})
	// On the way out, stop the background work (and give up the Lease) before the caches go.
	defer leader.stop()
	servers, err := startServers(cfg, backend, ccClient, clusterRules, m, logger)
	if err != nil {
		return err
	}
	return run(ctx, cfg.ShutdownTimeout.Duration, synced, servers, leader, logger)
}

// kubeClients are opi's clients of the API server, all over one transport that counts their
// requests, sends lost writes again and follows the caches' watches.
type kubeClients struct {
	rest    *rest.Config
	client  *kubernetes.Clientset
	watches *apiclient.Watches
}

// newKubeClients makes the Kubernetes client of cfg's cluster (its kubeconfig, else
// in-cluster), at cfg's rate, its requests counted in m.
func newKubeClients(cfg KubernetesConfig, m *metrics.Metrics) (kubeClients, error) {
	restConfig, err := kubeConfig(cfg.Kubeconfig)
	if err != nil {
		return kubeClients{}, fmt.Errorf("load kubernetes config: %w", err)
	}
	restConfig.QPS = cfg.KubeQPS
	restConfig.Burst = cfg.KubeBurst
	restConfig.UserAgent = "opi"
	// Protobuf, not JSON, for what opi reads (watch events above all): decoding it makes a
	// fraction of the garbage and CPU, which bounds opi's memory at thousands of apps.
	restConfig.ContentType = "application/vnd.kubernetes.protobuf"
	restConfig.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	restConfig.Wrap(m.WrapKubeTransport)
	// A write whose connection is lost under it (the API server, or a proxy, closing it) is
	// sent again rather than answered 503: client-go repeats only its GETs.
	restConfig.Wrap(apiclient.RetryLostConnection)
	// The backend refuses writes while its caches are not watching and the API server does not
	// answer (an outage): this follows their LISTs and WATCHes and every request's answer.
	watches := apiclient.NewWatches()
	restConfig.Wrap(watches.Wrap)
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return kubeClients{}, fmt.Errorf("create kubernetes client: %w", err)
	}
	return kubeClients{rest: restConfig, client: client, watches: watches}, nil
}

// newCCClient is Cloud Controller's client and the callbacks that deliver through it what the
// backend tells CC (task completions, staging results, crashes). It logs which of them are off.
func newCCClient(cfg CCConfig, logger lager.Logger) (*cc.Client, *bifrost.Callbacks, error) {
	ccClient, err := cc.New(cc.Options{
		InternalURL:    cfg.InternalURL,
		ClientCert:     cfg.ClientCert,
		ClientKey:      cfg.ClientKey,
		CA:             cfg.CA,
		Plaintext:      cfg.Plaintext,
		DeliveryBound:  cfg.DeliveryBound.Duration,
		CallbackURLs:   cfg.CallbackURLs,
		MaxPerEndpoint: cfg.MaxDeliveriesPerEndpoint,
	}, logger)
	if err != nil {
		return nil, nil, fmt.Errorf("cloud controller client: %w", err)
	}
	if cfg.InternalURL == "" {
		logger.Info("crash-reports-off", lager.Data{"reason": "no cc.internal_url configured"})
	}
	if cfg.InternalURL == "" && len(cfg.CallbackURLs) == 0 {
		logger.Info("callbacks-off", lager.Data{"reason": "neither cc.internal_url nor cc.callback_urls configured: every task and staging request is refused with 400"})
	}
	return ccClient, &bifrost.Callbacks{Client: ccClient}, nil
}

// checkCluster makes sure the apps' namespace is there (creating it if allowed) and finds the
// rules that depend on the cluster (env names, API versions), logged as found.
func checkCluster(ctx context.Context, cfg Config, client kubernetes.Interface, logger lager.Logger) (k8s.ClusterRules, error) {
	// The namespace check and the discovery are a few small requests: each has its own short
	// bound (k8s.Discover's is inside it), well within the start-up probe's minute.
	nsCtx, cancel := context.WithTimeout(ctx, ensureNamespaceTimeout)
	err := k8s.EnsureNamespace(nsCtx, client, cfg.Namespace, k8s.NamespaceOptions{Create: cfg.CreateNamespace, PodSecurity: cfg.Workloads.PodSecurity}, logger)
	cancel()
	if err != nil {
		return k8s.ClusterRules{}, fmt.Errorf("namespace %s: %w", cfg.Namespace, err)
	}
	return k8s.Discover(ctx, client, cfg.Namespace, logger), nil
}

// newBackendOptions are the backend's options from the configuration, with its Kubernetes
// clients, the callbacks it notifies and the stagings' image reader wired in.
func newBackendOptions(cfg Config, kc kubeClients, callbacks *bifrost.Callbacks) (k8s.Options, error) {
	opts := cfg.backendOptions()
	var err error
	// The janitor's lists ask for metadata only (PartialObjectMetadata, protobuf): the Secrets'
	// values never reach opi. Made from the same config: the same credentials and metrics.
	if opts.Clients.Metadata, err = metadata.NewForConfig(kc.rest); err != nil {
		return opts, fmt.Errorf("create kubernetes metadata client: %w", err)
	}
	opts.Clients.Watches = kc.watches
	opts.Notifiers.Crash = callbacks
	opts.Notifiers.Staging = callbacks
	opts.Notifiers.Task = callbacks
	if err := cfg.Staging.applyTo(&opts); err != nil {
		return opts, err
	}
	return opts, nil
}

// wireRouting hands the backend the Gateway API client (when the cluster serves HTTPRoutes)
// and, in routing mode nats, the gorouter emitter; it returns what wireNATS returns.
func wireRouting(ctx context.Context, cfg Config, kc kubeClients, m *metrics.Metrics, logger lager.Logger, opts *k8s.Options) (nodesSynced func() bool, err error) {
	if opts.Clients.Gateway, err = gatewayClient(ctx, cfg.Routing, kc.client.Discovery(), kc.rest, logger); err != nil {
		return nil, err
	}
	if cfg.NetworkPolicies && len(cfg.Routers) == 0 {
		logger.Info("no-routers", lager.Data{"note": "network policies are on and no router is configured: apps accept no connections"})
	}
	if cfg.Routing != k8s.RoutingNATS {
		return nil, nil
	}
	return wireNATS(ctx, cfg, opts.Clients.Metadata, logger, m, opts)
}

// startCaches starts the backend's caches, whose end (nil once synced) the returned channel
// gives. They sync while opi already serves: until they have, every call answers 503 (CC
// retries) and /readyz is not ready, while /healthz is fine, so that the kubelet does not
// restart an opi that is only slow to list 10,000 apps. Start ends early only for what waiting
// cannot mend (a forbidden LIST).
func startCaches(ctx context.Context, backend *k8s.Backend) <-chan error {
	synced := make(chan error, 1)
	go func() { synced <- backend.Start(ctx) }()
	return synced
}

// leaderWork is the background work (and the Lease), started once the caches are synced: the
// janitor and the reporters read them.
type leaderWork struct {
	ctx    context.Context
	cancel context.CancelFunc
	run    func(context.Context) error
	logger lager.Logger
	done   chan error // made when the work starts
}

// newLeaderWork is work run under cfg's leader election until ctx ends or stop is called.
func newLeaderWork(ctx context.Context, cfg Config, client kubernetes.Interface, logger lager.Logger, work func(context.Context)) *leaderWork {
	ctx, cancel := context.WithCancel(ctx)
	return &leaderWork{
		ctx:    ctx,
		cancel: cancel,
		run: func(ctx context.Context) error {
			return runAsLeader(ctx, cfg.LeaderElection, client, cfg.Namespace, logger, work)
		},
		logger: logger,
	}
}

// start runs the work in the background; it is called once.
func (l *leaderWork) start() {
	l.done = make(chan error, 1)
	go func() { l.done <- l.run(l.ctx) }()
}

// stop ends the work (and gives up the Lease) and waits for it, if it started.
func (l *leaderWork) stop() {
	l.cancel()
	if l.done == nil {
		return
	}
	if err := <-l.done; err != nil {
		l.logger.Error("leader-election-failed", err)
	}
}

// httpServers are opi's HTTP servers, each serving in a goroutine of its own.
type httpServers struct {
	servers []*http.Server
	served  chan error // a server's Serve has returned
}

// serve runs server on listener in the background.
func (s *httpServers) serve(server *http.Server, listener net.Listener) {
	s.servers = append(s.servers, server)
	go func() { s.served <- server.Serve(listener) }()
}

// startServers starts the OPI API's server and, with ops_listen, the operations server, and logs
// started.
func startServers(cfg Config, backend *k8s.Backend, ccClient *cc.Client, rules k8s.ClusterRules, m *metrics.Metrics, logger lager.Logger) (*httpServers, error) {
	listener, err := listenAPI(cfg, logger)
	if err != nil {
		return nil, err
	}
	// One readiness cache for both ports: at most one API server request a second for /readyz.
	readiness := handler.NewCachedReadiness(backend)
	s := &httpServers{served: make(chan error, 2)}
	s.serve(newServer(apiHandler(cfg, backend, ccClient, rules, readiness, m, logger), cfg.WriteTimeout.Duration), listener)
	if cfg.OpsListen != "" {
		opsListener, err := net.Listen("tcp", cfg.OpsListen)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", cfg.OpsListen, err)
		}
		s.serve(newOpsServer(handler.NewOps(handler.OpsConfig{
			Readiness: readiness, Logger: logger.Session("ops"), Metrics: m.Handler(), Pprof: cfg.Pprof,
		})), opsListener)
		logger.Info("ops-listening", lager.Data{"listen": opsListener.Addr().String(), "pprof": cfg.Pprof})
	}
	logger.Info("started", lager.Data{
		"listen": listener.Addr().String(), "namespace": cfg.Namespace,
		"tls": cfg.TLSCert != "", "mutual-tls": cfg.TLSClientCA != "", "version": version(),
		"caches": "syncing", "cache-sync-timeout": cfg.CacheSyncTimeout.String(),
	})
	return s, nil
}

// listenAPI is the OPI API's listener: TLS with tls_cert (its certificates reloaded as they
// change), after a warning when more than CC may drive opi.
func listenAPI(cfg Config, logger lager.Logger) (net.Listener, error) {
	var tlsConfig *tls.Config
	if cfg.TLSCert != "" {
		reloader, err := newCertReloader(cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA, cfg.TLSClientNames, logger.Session("tls"))
		if err != nil {
			return nil, err
		}
		tlsConfig = reloader.TLSConfig()
	}
	warnAboutClients(cfg, logger)
	listener, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	if tlsConfig != nil {
		listener = tls.NewListener(listener, tlsConfig)
	}
	return listener, nil
}

// apiHandler is the OPI API: bifrost's LRPs, tasks and stagings over the backend, refusing what
// the cluster's rules do not allow.
func apiHandler(cfg Config, backend *k8s.Backend, ccClient *cc.Client, rules k8s.ClusterRules, readiness *handler.CachedReadiness, m *metrics.Metrics, logger lager.Logger) http.Handler {
	tasks := &bifrost.Task{Backend: backend, URLs: ccClient, Rules: bifrost.Rules{StrictEnvNames: !rules.RelaxedEnvNames}, Defaults: bifrost.TaskDefaults{
		MemoryMB: cfg.TaskDefaults.MemoryMB, DiskMB: cfg.TaskDefaults.DiskMB, CPUWeight: cfg.TaskDefaults.CPUWeight,
	}}
	return handler.New(handler.Config{
		LRP:          &bifrost.LRP{Backend: backend, Rules: bifrost.Rules{StrictEnvNames: !rules.RelaxedEnvNames, UserAnnotationPrefixes: cfg.UserAnnotationPrefixes}},
		Task:         tasks,
		Readiness:    readiness,
		Logger:       logger.Session("api"),
		MaxBodyBytes: cfg.MaxBodyBytes,
		MaxInFlight:  cfg.MaxInFlight,
		Observer:     m,
		Metrics:      m.Handler(),
		WriteTimeout: cfg.WriteTimeout.Duration,
		Staging:      &bifrost.Staging{Stager: backend, URLs: ccClient},
	})
}

// run serves until ctx ends or the caches cannot start, starting the leader work once they have
// synced, and then shuts the servers down within shutdownTimeout. A server that stops serving
// ends it at once.
func run(ctx context.Context, shutdownTimeout time.Duration, synced <-chan error, servers *httpServers, leader *leaderWork, logger lager.Logger) error {
	var failed error
wait:
	for {
		select {
		case err := <-synced:
			if err != nil {
				failed = fmt.Errorf("start kubernetes caches: %w", err)
				logger.Error("cannot-start", failed)
				break wait
			}
			synced = nil // synced once: receive no more
			leader.start()
			cli.ReleaseStartupPages(logger, "caches-synced")
		case err := <-servers.served:
			return fmt.Errorf("serve: %w", err)
		case <-ctx.Done():
			break wait
		}
	}

	logger.Info("stopping", lager.Data{"timeout": shutdownTimeout.String()})
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancelShutdown()
	for _, server := range servers.servers {
		if err := server.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return errors.Join(failed, fmt.Errorf("shut down: %w", err))
		}
	}
	logger.Info("stopped")
	return failed
}

// warnAboutClients logs, at start-up, who may drive opi when that is more than CC: any
// certificate of the client CA (no tls_client_names), or anyone (no client CA at all).
func warnAboutClients(cfg Config, logger lager.Logger) {
	switch {
	case cfg.TLSClientCA != "" && len(cfg.TLSClientNames) == 0:
		logger.Info("warning-any-client-certificate-accepted", lager.Data{
			"tls-client-ca": cfg.TLSClientCA,
			"note":          "tls_client_names is empty (loopback, or insecure_any_client_certificate): any certificate the client CA signed may drive opi; name CC's certificate in tls_client_names",
		})
	case cfg.TLSClientCA == "" && cfg.InsecureSkipClientCertificates:
		logger.Info("warning-no-client-certificates", lager.Data{
			"listen": cfg.Listen,
			"note":   "insecure_skip_client_certificates is on: anyone who reaches the listen address may drive opi",
		})
	}
}

// ensureNamespaceTimeout bounds the namespace check (and its creation) at start-up.
const ensureNamespaceTimeout = 20 * time.Second

// Bounds on slow clients. CC sends a request in one go: its headers and a body of at most
// max_body_bytes arrive in seconds, and its keep-alive connections idle between sync rounds.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	// writeSlack is what an answer may take past the write timeout: a write that reached its
	// deadline still answers 503, and GET /apps streams megabytes at thousands of apps.
	writeSlack = 30 * time.Second
)

// opsWriteTimeout bounds each answer of the ops server: pprof's longest (a CPU profile or trace
// of handler.MaxPprofSeconds) plus writeSlack to send it. Probes and /metrics take milliseconds.
const opsWriteTimeout = handler.MaxPprofSeconds*time.Second + writeSlack

// newOpsServer is the operations listener's HTTP server: newServer's bounds on slow clients,
// and a write timeout that covers pprof's longest profile (and nothing longer).
func newOpsServer(h http.Handler) *http.Server {
	return newServer(h, opsWriteTimeout-writeSlack)
}

// newServer is an HTTP server for h that bounds slow clients. Its WriteTimeout (counted from
// the end of the request's headers) covers the write timeout of the handler's backend calls
// plus writeSlack, so that it never cuts an answer the handler still means to give.
func newServer(h http.Handler, writeTimeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout + writeSlack,
		IdleTimeout:       idleTimeout,
	}
}
