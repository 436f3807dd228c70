package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"golang.org/x/crypto/ssh"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opi-bridge/opi/cmd/internal/cli"
	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/sshproxy"
)

// SSHProxyConfig is `opi ssh-proxy`'s configuration: a YAML file (--config) whose keys flags
// override.
type SSHProxyConfig struct {
	// Listen is the SSH endpoint's address (CC's app_ssh.external_host and _port lead to it).
	Listen string `json:"listen"`
	// Kubeconfig is the apps' cluster; else $KUBECONFIG, else in-cluster.
	Kubeconfig string `json:"kubeconfig"`
	// Namespace and Backend are opi's: where its apps run and as what (how instances are
	// indexed).
	Namespace string `json:"namespace"`
	Backend   string `json:"backend"`
	// HostKey is the proxy's host key (PEM).
	HostKey string `json:"host_key"`
	// UAATokenURL, UAAClientID and UAAClientSecret (or UAAClientSecretFile) are the UAA client
	// the proxy exchanges the users' one-time codes with; UAACA signed UAA's certificate.
	UAATokenURL         string `json:"uaa_token_url"`
	UAAClientID         string `json:"uaa_client_id"`
	UAAClientSecret     string `json:"uaa_client_secret"`
	UAAClientSecretFile string `json:"uaa_client_secret_file"`
	UAACA               string `json:"uaa_ca"`
	// CCAPIURL serves /internal/apps/<guid>/ssh_access/<index>; CCCA signed its certificate.
	CCAPIURL string `json:"cc_api_url"`
	CCCA     string `json:"cc_ca"`
	// AllowPlainHTTP allows http:// to UAA and CC off loopback (CC's internal port).
	AllowPlainHTTP bool `json:"allow_plain_http"`
	// MaxSessions, MaxSessionsPerUser, IdleTimeout and AuthTimeout are the session bounds.
	MaxSessions        int      `json:"max_sessions"`
	MaxSessionsPerUser int      `json:"max_sessions_per_user"`
	IdleTimeout        Duration `json:"idle_timeout"`
	AuthTimeout        Duration `json:"auth_timeout"`
	// SFTPServerPaths are where the sftp subsystem looks for the image's sftp-server.
	SFTPServerPaths []string `json:"sftp_server_paths"`
	// OpsListen is the plain HTTP ops endpoint (/healthz, /readyz, /fingerprints); "" none.
	OpsListen string `json:"ops_listen"`
	LogLevel  string `json:"log_level"`
	// OtherHostTunnels allows tunnels to hosts other than the instance itself, dialled from
	// inside the instance's pod by a relay container of RelayImage added to it.
	OtherHostTunnels bool `json:"other_host_tunnels"`
	// RelayImage is the relay container's image, opi's own; empty: the image the proxy's own
	// pod runs (read through POD_NAME and POD_NAMESPACE).
	RelayImage string `json:"relay_image"`
	// RelayBinary is the path of opi's binary in RelayImage.
	RelayBinary string `json:"relay_binary"`
	// RelayDialTimeout bounds a relay's dial; RelayStartTimeout how long a new relay container
	// may take to run.
	RelayDialTimeout  Duration `json:"relay_dial_timeout"`
	RelayStartTimeout Duration `json:"relay_start_timeout"`
	// Loggregator is where the proxy sends the lines saying who came into an instance and
	// when they left (as `opi connect`'s section); absent: no lines.
	Loggregator LoggregatorConfig `json:"loggregator"`

	// hostKey is HostKey's key, read by validate.
	hostKey ssh.Signer
}

// DefaultSSHProxyConfig is what `opi ssh-proxy` runs with when nothing is configured.
func DefaultSSHProxyConfig() SSHProxyConfig {
	return SSHProxyConfig{
		Listen:             ":2222",
		Namespace:          "cf-workloads",
		Backend:            k8s.Deployments,
		MaxSessions:        sshproxy.DefaultMaxSessions,
		MaxSessionsPerUser: sshproxy.DefaultMaxSessionsPerUser,
		IdleTimeout:        Duration{sshproxy.DefaultIdleTimeout},
		AuthTimeout:        Duration{sshproxy.DefaultAuthTimeout},
		SFTPServerPaths:    slices.Clone(sshproxy.DefaultSFTPServerPaths),
		OpsListen:          ":2223",
		LogLevel:           "info",
		OtherHostTunnels:   true,
		RelayBinary:        sshproxy.DefaultRelayBinary,
		RelayDialTimeout:   Duration{sshproxy.DefaultRelayDialTimeout},
		RelayStartTimeout:  Duration{sshproxy.DefaultRelayStartTimeout},
	}
}

// LoadSSHProxyConfig reads args of `opi ssh-proxy`: defaults, then the config file, then flags.
func LoadSSHProxyConfig(args []string) (SSHProxyConfig, error) {
	cfg, err := loadLayered(args, DefaultSSHProxyConfig, parseSSHProxyFlags)
	if err != nil {
		return cfg, err
	}
	if cfg.Kubeconfig == "" {
		cfg.Kubeconfig = os.Getenv("KUBECONFIG")
	}
	return cfg, cfg.validate()
}

func parseSSHProxyFlags(args []string, cfg *SSHProxyConfig) (configPath string, err error) {
	fs := flag.NewFlagSet("opi ssh-proxy", flag.ContinueOnError)
	fs.StringVar(&configPath, "config", "", "YAML config file")
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "address of the SSH endpoint")
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", cfg.Kubeconfig, "kubeconfig of the cluster (default $KUBECONFIG, else in-cluster)")
	fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "opi's apps namespace")
	fs.StringVar(&cfg.Backend, "backend", cfg.Backend, "opi's backend: deployments or statefulsets (how instances are indexed)")
	fs.StringVar(&cfg.HostKey, "host-key", cfg.HostKey, "the proxy's host key, PEM (required)")
	fs.StringVar(&cfg.UAATokenURL, "uaa-token-url", cfg.UAATokenURL, "UAA's token endpoint, e.g. https://uaa.example.com/oauth/token (required)")
	fs.StringVar(&cfg.UAAClientID, "uaa-client-id", cfg.UAAClientID, "the proxy's UAA client (required)")
	fs.StringVar(&cfg.UAAClientSecret, "uaa-client-secret", cfg.UAAClientSecret, "its secret (or --uaa-client-secret-file)")
	fs.StringVar(&cfg.UAAClientSecretFile, "uaa-client-secret-file", cfg.UAAClientSecretFile, "a file holding its secret")
	fs.StringVar(&cfg.UAACA, "uaa-ca", cfg.UAACA, "CA (PEM) of UAA's certificate (default the system's)")
	fs.StringVar(&cfg.CCAPIURL, "cc-api-url", cfg.CCAPIURL, "Cloud Controller's URL serving /internal/apps/<guid>/ssh_access/<index> (required)")
	fs.StringVar(&cfg.CCCA, "cc-ca", cfg.CCCA, "CA (PEM) of Cloud Controller's certificate (default the system's)")
	fs.BoolVar(&cfg.AllowPlainHTTP, "allow-plain-http", cfg.AllowPlainHTTP, "allow http:// to UAA and Cloud Controller off loopback (the user's token crosses in the clear)")
	fs.IntVar(&cfg.MaxSessions, "max-sessions", cfg.MaxSessions, "authenticated connections the proxy holds at once (and connections authenticating)")
	fs.IntVar(&cfg.MaxSessionsPerUser, "max-sessions-per-user", cfg.MaxSessionsPerUser, "authenticated connections one user holds at once")
	fs.Var(&cfg.IdleTimeout, "idle-timeout", "how long a connection may carry nothing before it is closed")
	fs.Var(&cfg.AuthTimeout, "auth-timeout", "how long a connection may take to authenticate")
	fs.Var((*stringList)(&cfg.SFTPServerPaths), "sftp-server-paths", "comma-separated paths where the sftp subsystem looks for the image's sftp-server, in order")
	fs.StringVar(&cfg.OpsListen, "ops-listen", cfg.OpsListen, "address of the plain HTTP ops endpoint (/healthz, /readyz, /fingerprints); empty: none")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, error or fatal")
	fs.BoolVar(&cfg.OtherHostTunnels, "other-host-tunnels", cfg.OtherHostTunnels, "allow tunnels to hosts other than the instance, dialled from inside its pod by a relay container")
	fs.StringVar(&cfg.RelayImage, "relay-image", cfg.RelayImage, "the relay container's image, opi's own (default: the image of the proxy's own pod, read through POD_NAME and POD_NAMESPACE)")
	fs.StringVar(&cfg.RelayBinary, "relay-binary", cfg.RelayBinary, "the path of opi's binary in the relay image")
	fs.Var(&cfg.RelayDialTimeout, "relay-dial-timeout", "how long a relay's dial to another host may take")
	fs.Var(&cfg.RelayStartTimeout, "relay-start-timeout", "how long a new relay container may take to run (its image pulled)")
	cfg.Loggregator.bindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if fs.NArg() > 0 {
		return "", fmt.Errorf("opi ssh-proxy takes no arguments, got %q", fs.Args())
	}
	return configPath, nil
}

// validate checks what the command itself reads; the proxy's options are checked by sshproxy.
func (c *SSHProxyConfig) validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen %q is not [HOST]:PORT", c.Listen))
	}
	if c.OpsListen != "" {
		if _, _, err := net.SplitHostPort(c.OpsListen); err != nil {
			errs = append(errs, fmt.Errorf("ops_listen %q is not [HOST]:PORT", c.OpsListen))
		}
	}
	if c.Namespace == "" {
		errs = append(errs, errors.New("namespace must not be empty"))
	}
	if c.Backend != k8s.Deployments && c.Backend != k8s.StatefulSets {
		errs = append(errs, fmt.Errorf("backend %q is not one of %s, %s", c.Backend, k8s.Deployments, k8s.StatefulSets))
	}
	if c.HostKey == "" {
		errs = append(errs, errors.New("host_key (--host-key) is required"))
	} else if key, err := sshproxy.LoadHostKey(c.HostKey); err != nil {
		errs = append(errs, fmt.Errorf("host_key: %w", err))
	} else {
		c.hostKey = key
	}
	switch {
	case c.UAAClientSecret != "" && c.UAAClientSecretFile != "":
		errs = append(errs, errors.New("give uaa_client_secret or uaa_client_secret_file, not both"))
	case c.UAAClientSecretFile != "":
		secret, err := os.ReadFile(c.UAAClientSecretFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("uaa_client_secret_file: %w", err))
		}
		c.UAAClientSecret = strings.TrimSpace(string(secret))
	}
	switch c.LogLevel {
	case "debug", "info", "error", "fatal":
	default:
		errs = append(errs, fmt.Errorf("log_level %q is not one of debug, info, error, fatal", c.LogLevel))
	}
	if err := c.Loggregator.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.OtherHostTunnels {
		if !strings.HasPrefix(c.RelayBinary, "/") {
			errs = append(errs, fmt.Errorf("relay_binary %q is not an absolute path", c.RelayBinary))
		}
		if d := c.RelayDialTimeout.Duration; d <= 0 || d > time.Minute {
			errs = append(errs, fmt.Errorf("relay_dial_timeout (%s) must be positive and at most 1m", d))
		}
		if c.RelayStartTimeout.Duration <= 0 {
			errs = append(errs, fmt.Errorf("relay_start_timeout (%s) must be positive", c.RelayStartTimeout.Duration))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.options().Validate()
}

// options are the proxy's options from the configuration.
func (c SSHProxyConfig) options() sshproxy.Options {
	return sshproxy.Options{
		HostKey: c.hostKey,
		Auth: sshproxy.AuthConfig{
			UAATokenURL: c.UAATokenURL, UAAClientID: c.UAAClientID, UAAClientSecret: c.UAAClientSecret, UAACA: c.UAACA,
			CCAPIURL: c.CCAPIURL, CCCA: c.CCCA, AllowPlainHTTP: c.AllowPlainHTTP,
		},
		MaxSessions:        c.MaxSessions,
		MaxSessionsPerUser: c.MaxSessionsPerUser,
		IdleTimeout:        c.IdleTimeout.Duration,
		AuthTimeout:        c.AuthTimeout.Duration,
		SFTPServerPaths:    c.SFTPServerPaths,
	}
}

// runSSHProxy runs `opi ssh-proxy` until ctx ends.
func runSSHProxy(ctx context.Context, cfg SSHProxyConfig) error {
	logger, err := newLogger(os.Stdout, cfg.LogLevel)
	if err != nil {
		return err
	}
	restConfig, err := kubeConfig(cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubernetes config: %w", err)
	}
	restConfig.UserAgent = "opi-ssh-proxy"
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	executor, err := sshproxy.NewPodExecutor(restConfig, cfg.Namespace)
	if err != nil {
		return err
	}
	forwarder, err := sshproxy.NewPodForwarder(restConfig, cfg.Namespace)
	if err != nil {
		return err
	}
	deps := sshproxy.Deps{Executor: executor, Forwarder: forwarder, Logger: logger}
	sender, stopSender, err := startLoggregator(cfg.Loggregator, logger)
	if err != nil {
		return err
	}
	defer stopSender()
	if sender != nil {
		deps.Lines = sender
		logger.Info("ssh-lines", lager.Data{"loggregator": cfg.Loggregator.Addr})
	} else {
		logger.Info("ssh-lines-off", lager.Data{"reason": "no loggregator.addr configured"})
	}
	if relay := wireRelay(ctx, client, executor, cfg, logger); relay != nil {
		deps.Relay = relay
	}
	reader := sshproxy.NewInstances(client, cfg.Namespace, cfg.Backend == k8s.StatefulSets, logger)
	defer reader.Shutdown()
	deps.Instances = reader
	srv, err := sshproxy.New(cfg.options(), deps)
	if err != nil {
		return err
	}
	prints := srv.Fingerprints()
	logger.Info("host-key", lager.Data{"sha256": prints.SHA256, "sha1": prints.SHA1, "md5": prints.MD5})

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ready atomic.Bool
	if cfg.OpsListen != "" {
		_, done, err := cli.StartOps(ctx, cfg.OpsListen, srv.OpsHandler(ready.Load), logger)
		if err != nil {
			return err
		}
		defer func() { cancel(); <-done }()
	}
	if err := reader.Start(ctx); err != nil {
		return fmt.Errorf("reading the instances: %w", err)
	}
	l, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ready.Store(true)
	logger.Info("listening", lager.Data{"addr": l.Addr().String()})
	return srv.Serve(ctx, l)
}

// wireRelay is the relay of the tunnels to other hosts, nil when they are off: turned off, or
// with no image to run (logged).
func wireRelay(ctx context.Context, client kubernetes.Interface, executor sshproxy.Executor, cfg SSHProxyConfig, logger lager.Logger) sshproxy.Relay {
	if !cfg.OtherHostTunnels {
		logger.Info("other-host-tunnels-off", lager.Data{"reason": "other_host_tunnels is false"})
		return nil
	}
	image, err := relayImage(ctx, client, cfg.RelayImage, os.Getenv("POD_NAME"), cmp.Or(os.Getenv("POD_NAMESPACE"), cfg.Namespace))
	if err != nil {
		logger.Info("other-host-tunnels-off", lager.Data{"reason": err.Error()})
		return nil
	}
	logger.Info("other-host-tunnels", lager.Data{"relay-image": image, "relay-binary": cfg.RelayBinary})
	return sshproxy.NewPodRelay(client, cfg.Namespace, executor, sshproxy.RelayOptions{
		Image: image, Binary: cfg.RelayBinary,
		DialTimeout: cfg.RelayDialTimeout.Duration, StartTimeout: cfg.RelayStartTimeout.Duration,
	})
}

// relayImage is the configured relay image, else the image of the proxy's own pod (the
// container running opi ssh-proxy), so the relay runs the same binary as the proxy.
func relayImage(ctx context.Context, client kubernetes.Interface, configured, podName, namespace string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	if podName == "" {
		return "", errors.New("no relay_image configured and POD_NAME unset (not in a pod)")
	}
	pod, err := client.CoreV1().Pods(namespace).Get(ctx, podName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading the proxy's own pod for its image: %w", err)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name == sshProxyContainer {
			return c.Image, nil
		}
	}
	return "", fmt.Errorf("the proxy's own pod %s has no container %s", podName, sshProxyContainer)
}

// sshProxyContainer is the proxy's container in its kustomize component's Deployment.
const sshProxyContainer = "opi-ssh-proxy"

// mainSSHProxy is `opi ssh-proxy`: the SSH endpoint of `cf ssh`.
func mainSSHProxy(args []string) {
	cli.RunSubcommand("opi ssh-proxy", args, LoadSSHProxyConfig, runSSHProxy)
}
