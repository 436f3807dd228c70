// Command opi is the OPI server: `opi connect` serves Cloud Controller's LRP API and runs the
// apps on Kubernetes.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/cc"
	"github.com/opi-bridge/opi/handler"
	"github.com/opi-bridge/opi/imageconfig"
	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/metrics"
)

// defaultGCPercent is opi's GOGC unless the environment sets one.
const defaultGCPercent = 25

const usage = `usage: opi connect [--config FILE] [--listen ADDR] [--kubeconfig PATH] [--namespace NS] [flags]

Serves Cloud Controller's OPI API and runs its apps on Kubernetes. "opi connect -h" lists the flags.
`

func main() {
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

func newLogger(level string) lager.Logger {
	logger := lager.NewLogger("opi")
	minLevel, _ := lager.LogLevelFromString(level)
	logger.RegisterSink(lager.NewWriterSink(os.Stdout, minLevel))
	return logger
}

func kubeConfig(path string) (*rest.Config, error) {
	if path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	return rest.InClusterConfig()
}

func connect(ctx context.Context, cfg Config) error {
	logger := newLogger(cfg.LogLevel)

	restConfig, err := kubeConfig(cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubernetes config: %w", err)
	}
	restConfig.QPS = cfg.KubeQPS
	restConfig.Burst = cfg.KubeBurst
	restConfig.UserAgent = "opi"
	// Protobuf, not JSON, for what opi reads (watch events above all): decoding it makes a
	// fraction of the garbage and CPU, which bounds opi's memory at thousands of apps.
	restConfig.ContentType = "application/vnd.kubernetes.protobuf"
	restConfig.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	m := metrics.New()
	restConfig.Wrap(m.WrapKubeTransport)
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("create kubernetes client: %w", err)
	}

	ccClient, err := cc.New(cc.Options{
		InternalURL:   cfg.CC.InternalURL,
		ClientCert:    cfg.CC.ClientCert,
		ClientKey:     cfg.CC.ClientKey,
		CA:            cfg.CC.CA,
		Plaintext:     cfg.CC.Plaintext,
		DeliveryBound: cfg.CC.DeliveryBound.Duration,
	}, logger)
	if err != nil {
		return fmt.Errorf("cloud controller client: %w", err)
	}
	if cfg.CC.InternalURL == "" {
		logger.Info("crash-reports-off", lager.Data{"reason": "no cc.internal_url configured"})
	}
	// callbacks deliver what the backend tells CC (task completions, crashes).
	callbacks := &bifrost.Callbacks{Client: ccClient}

	startCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := k8s.EnsureNamespace(startCtx, client, cfg.Namespace, cfg.CreateNamespace); err != nil {
		return fmt.Errorf("namespace %s: %w", cfg.Namespace, err)
	}
	// Rules that depend on the cluster (env names, API versions), logged as found.
	cluster := k8s.DiscoverCluster(startCtx, client, cfg.Namespace, logger)
	backendOptions := cfg.backendOptions()
	backendOptions.CrashNotifier = callbacks
	backendOptions.ImageReader = &imageconfig.Reader{}
	backendOptions.StagingNotifier = callbacks
	backendOptions.TaskNotifier = callbacks
	backend := k8s.NewBackend(client, logger.Session("k8s"), backendOptions)
	// The informers (and the janitor) live until opi has shut down, not only as long as the
	// start-up deadline or the signal: requests in flight at SIGTERM still wait on the caches.
	backendCtx, stopBackend := context.WithCancel(context.Background())
	defer stopBackend()
	synced := make(chan error, 1)
	go func() { synced <- backend.Start(backendCtx) }()
	select {
	case err := <-synced:
		if err != nil {
			return fmt.Errorf("start kubernetes caches: %w", err)
		}
	case <-startCtx.Done():
		return fmt.Errorf("start kubernetes caches: %w", startCtx.Err())
	}

	leaderCtx, stopLeading := context.WithCancel(backendCtx)
	leaderDone := make(chan error, 1)
	go func() {
		leaderDone <- runAsLeader(leaderCtx, cfg.LeaderElection, client, cfg.Namespace, logger, backend.RunLeaderWork)
	}()
	// On the way out, stop the background work (and give up the Lease) before the caches go.
	defer func() {
		stopLeading()
		if err := <-leaderDone; err != nil {
			logger.Error("leader-election-failed", err)
		}
	}()

	tlsConfig, err := serverTLS(cfg)
	if err != nil {
		return err
	}
	listener, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	if tlsConfig != nil {
		listener = tls.NewListener(listener, tlsConfig)
	}
	if cfg.DebugListen != "" {
		go serveDebug(logger, cfg.DebugListen)
	}
	tasks := &bifrost.Task{Backend: backend, URLs: ccClient, Rules: bifrost.Rules{StrictEnvNames: !cluster.RelaxedEnvNames}, Defaults: bifrost.TaskDefaults{
		MemoryMB: cfg.TaskDefaults.MemoryMB, DiskMB: cfg.TaskDefaults.DiskMB, CPUWeight: cfg.TaskDefaults.CPUWeight,
	}}
	server := &http.Server{
		Handler: handler.New(handler.Config{
			LRP:          &bifrost.LRP{Backend: backend, Rules: bifrost.Rules{StrictEnvNames: !cluster.RelaxedEnvNames}},
			Task:         tasks,
			Readiness:    backend,
			Logger:       logger.Session("api"),
			MaxBodyBytes: cfg.MaxBodyBytes,
			Observer:     m,
			Metrics:      m.Handler(),
			WriteTimeout: cfg.WriteTimeout.Duration,
			Staging:      &bifrost.Staging{Stager: backend, URLs: ccClient},
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	logger.Info("started", lager.Data{
		"listen": listener.Addr().String(), "namespace": cfg.Namespace,
		"tls": tlsConfig != nil, "mutual-tls": cfg.TLSClientCA != "",
	})

	served := make(chan error, 1)
	go func() { served <- server.Serve(listener) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}

	logger.Info("stopping", lager.Data{"timeout": cfg.ShutdownTimeout.String()})
	shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), cfg.ShutdownTimeout.Duration)
	defer cancelShutdown()
	if err := server.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shut down: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// serverTLS is the TLS configuration of the API: nil for plain HTTP, else TLS 1.2 or newer,
// requiring a client certificate signed by the client CA when one is configured.
func serverTLS(cfg Config) (*tls.Config, error) {
	if cfg.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("load tls certificate: %w", err)
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if cfg.TLSClientCA != "" {
		pem, err := os.ReadFile(cfg.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("read tls client ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls client ca %s holds no PEM certificate", cfg.TLSClientCA)
		}
		tlsConfig.ClientCAs = pool
		tlsConfig.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tlsConfig, nil
}

// serveDebug serves Go's pprof profiles on a loopback address, for operators chasing memory
// or CPU.
func serveDebug(logger lager.Logger, addr string) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	logger.Info("debug-listening", lager.Data{"address": addr})
	server := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	if err := server.ListenAndServe(); err != nil {
		logger.Error("debug-server-failed", err)
	}
}
