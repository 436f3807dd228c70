// Package localkube runs a real Kubernetes control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) on loopback, with kwok simulating the nodes and their
// kubelets: pods are scheduled and reported Running without any container runtime. It backs the
// integration suite, the benchmark and `make run`.
package localkube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// NodeAnnotation is the annotation (value "fake") by which kwok picks the nodes it simulates.
const NodeAnnotation = "kwok.x-k8s.io/node"

// StagesFile is the name, in the bin folder, of kwok's fast node and pod stages (build.sh writes
// it from the pinned kwok module).
const StagesFile = "kwok-stages.yaml"

// Options configures Start. Zero values mean the defaults noted on each field.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok,
	// kwok-stages.yaml and kwok-crds.yaml. Default: BinDir() (builds them on first use).
	BinDir string
	// WorkDir is the folder in which a fresh localkube-* folder is made for this cluster's data,
	// certificates, kubeconfig and logs. Default: os.TempDir(). The fresh folder, and the scratch
	// folder of exec'd commands (ExecDir), are removed by Stop unless KeepWorkDir is set.
	WorkDir     string
	KeepWorkDir bool
	// Nodes is the number of simulated nodes. Default 1.
	Nodes int
	// Capacity (and allocatable) of each node. Defaults "32", "256Gi", "250", "1Ti".
	NodeCPU, NodeMemory, NodePods, NodeEphemeralStorage string
	// ControllerQPS and ControllerBurst set --kube-api-qps/--kube-api-burst of the
	// controller-manager and scheduler. 0 keeps their defaults (controller-manager 20/30,
	// scheduler 50/100 requests/s): fine for tests, too slow for thousands of apps. kwok's own
	// client is not rate limited (and kwok has no such flags).
	ControllerQPS, ControllerBurst int
	// Tuning holds the settings large clusters change; its zero value keeps every default.
	Tuning Tuning
	// Log receives the output of every process, each line tagged with the process name. Default:
	// one file per process in <work folder>/logs.
	Log io.Writer
	// KwokConfig is more of kwok's configuration (YAML documents, e.g. a ClusterPortForward for
	// a port the simulated pods should answer on), read after localkube's own. Default: none.
	KwokConfig string
}

// Timeouts of the start-up waits; a cold machine running the test suite in parallel needs more
// than an idle one.
const (
	apiServerReadyTimeout = 2 * time.Minute
	clusterReadyTimeout   = 2 * time.Minute
)

// Cluster is a running control plane. Its methods are safe for concurrent use.
type Cluster struct {
	opts    Options
	workDir string
	// execDir is the scratch folder kwok runs exec'd commands in (see execRule).
	execDir string
	creds   *credentials

	etcdPort, etcdPeerPort, apiPort int
	// Ports of the components' own metrics and pprof servers.
	cmPort, schedPort, kwokPort int
	kubeconfig                  string
	restConfig                  *rest.Config
	clientset                   kubernetes.Interface

	mu      sync.Mutex
	procs   []*process // components in start order (a restarted one keeps its place)
	started []*process // every process ever started, for PIDs
	stopped bool
	// starting is true until Start returns: then any component exiting is fatal, not only the
	// one being waited for (an API server cannot get ready if etcd died).
	starting bool
}

// Start brings up a control plane with simulated nodes and returns once every node is Ready and
// the controller-manager has made the default ServiceAccount. On failure everything started is
// stopped and the error carries the last lines of the failing component's output.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	opts = withDefaults(opts)
	if opts.BinDir == "" {
		dir, err := BinDir()
		if err != nil {
			return nil, err
		}
		opts.BinDir = dir
	}
	for _, f := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", StagesFile, CRDsFile} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, f)); err != nil {
			return nil, fmt.Errorf("checking the bin folder (run tools/kube/build.sh): %w", err)
		}
	}
	if opts.WorkDir != "" {
		if err := os.MkdirAll(opts.WorkDir, 0o755); err != nil {
			return nil, fmt.Errorf("creating the work folder: %w", err)
		}
	}
	// The free ports are only free when picked: a parallel run may take one before our component
	// binds it. That failure is retried with new ports; any other is returned.
	const attempts = 3
	for attempt := 1; ; attempt++ {
		c, err := startOnce(ctx, opts)
		if err == nil {
			return c, nil
		}
		if attempt == attempts || ctx.Err() != nil || !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
	}
}

func startOnce(ctx context.Context, opts Options) (*Cluster, error) {
	workDir, err := os.MkdirTemp(opts.WorkDir, "localkube-")
	if err != nil {
		return nil, fmt.Errorf("creating the work folder: %w", err)
	}
	// Absolute, so the paths in the components' flags and in errors mean the same from anywhere.
	if abs, err := filepath.Abs(workDir); err == nil {
		workDir = abs
	}
	c := &Cluster{opts: opts, workDir: workDir, starting: true}
	if err := c.start(ctx); err != nil {
		if stopErr := c.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, err
	}
	c.mu.Lock()
	c.starting = false
	c.mu.Unlock()
	return c, nil
}

func withDefaults(o Options) Options {
	if o.Nodes <= 0 {
		o.Nodes = 1
	}
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&o.NodeCPU, "32")
	def(&o.NodeMemory, "256Gi")
	def(&o.NodePods, "250")
	def(&o.NodeEphemeralStorage, "1Ti")
	return o
}

func (c *Cluster) start(ctx context.Context) error {
	for _, d := range []string{"etcd", "logs"} {
		if err := os.MkdirAll(filepath.Join(c.workDir, d), 0o700); err != nil {
			return fmt.Errorf("creating the %s folder: %w", d, err)
		}
	}
	creds, err := writeCredentials(filepath.Join(c.workDir, "certs"))
	if err != nil {
		return err
	}
	c.creds = creds

	ports, err := freePorts(6)
	if err != nil {
		return err
	}
	c.etcdPort, c.etcdPeerPort, c.apiPort = ports[0], ports[1], ports[2]
	c.cmPort, c.schedPort, c.kwokPort = ports[3], ports[4], ports[5]

	if err := c.writeKubeconfig(); err != nil {
		return err
	}

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(c.etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(c.etcdPeerPort)
	if _, err := c.run("etcd", c.opts.Tuning.etcdArgs(
		"--name", "default",
		"--data-dir", filepath.Join(c.workDir, "etcd"),
		"--listen-client-urls", etcdURL,
		"--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL,
		"--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default="+peerURL,
		// The data is thrown away with the cluster: skipping fsync makes writes (and so the
		// benchmark) measure opi and the API server rather than the disk.
		"--unsafe-no-fsync",
		"--log-level", "warn",
		// /debug/pprof on the client URL, beside /metrics, for CPU profiles of the benchmark.
		"--enable-pprof",
	)...); err != nil {
		return err
	}

	if err := c.StartAPIServer(ctx); err != nil {
		return err
	}

	qps := func(args []string) []string {
		if c.opts.ControllerQPS > 0 {
			args = append(args, "--kube-api-qps", strconv.Itoa(c.opts.ControllerQPS))
		}
		if c.opts.ControllerBurst > 0 {
			args = append(args, "--kube-api-burst", strconv.Itoa(c.opts.ControllerBurst))
		}
		return args
	}
	kc := c.kubeconfig
	cm, err := c.run("kube-controller-manager", c.opts.Tuning.controllerManagerArgs(qps(c.observable(c.cmPort, []string{
		"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--leader-elect=false",
		"--controllers", "*",
		"--service-account-private-key-file", c.creds.saKey,
		"--root-ca-file", c.creds.caCert,
		"--cluster-signing-cert-file", c.creds.caCert,
		"--cluster-signing-key-file", c.creds.caKey,
	})))...)
	if err != nil {
		return err
	}
	if _, err := c.run("kube-scheduler", qps(c.observable(c.schedPort, []string{
		"--kubeconfig", kc, "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
		"--leader-elect=false",
	}))...); err != nil {
		return err
	}

	execDir, execIDs, err := makeExecDir()
	if err != nil {
		return err
	}
	c.execDir = execDir
	if err := c.installCRDs(ctx); err != nil {
		return err
	}
	ourStages := filepath.Join(c.workDir, "localkube-stages.yaml")
	more := ""
	if c.opts.KwokConfig != "" {
		more = "---\n" + c.opts.KwokConfig
	}
	if err := os.WriteFile(ourStages, []byte(c.opts.Tuning.kwokConfig()+execRule(execDir, execIDs)+crashStage+"---\n"+imagePullStage+"---\n"+taskStages+"---\n"+ephemeralContainersStage+more), 0o644); err != nil {
		return fmt.Errorf("writing our kwok stages: %w", err)
	}
	kwok, err := c.run("kwok",
		"--kubeconfig", kc,
		"--config", filepath.Join(c.opts.BinDir, StagesFile),
		"--config", ourStages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector", NodeAnnotation+"=fake",
		"--enable-crds", kwokCRDs,
		// Pod IPs come from one pool shared by every node without a podCIDR (ours have none):
		// a /16 gives each of tens of thousands of pods its own IP, as gorouter's registrations
		// need (kwok's default /24 runs out at 254 and hands IPs out again).
		"--cidr", "10.0.0.1/16",
		// The nodes advertise a loopback address and kwok's own port as their kubelet's, so the
		// API server reaches kwok's server for exec (and port-forward) as it would a kubelet.
		"--node-ip", "127.0.0.1",
		"--node-port", strconv.Itoa(c.kwokPort),
		// Without leases (kwok's default) nothing heartbeats the nodes: the node lifecycle
		// controller marks them NotReady every 50 s (and their pods not ready) until kwok's
		// node-initialize stage puts them back. A renewed lease is the kubelet's heartbeat.
		"--node-lease-duration-seconds", "40",
		// On loopback only (--node-port alone would listen on every address), plain HTTP for
		// /metrics and /debug/pprof of the benchmark and TLS for the API server on the same port.
		"--server-address", "127.0.0.1:"+strconv.Itoa(c.kwokPort),
	)
	if err != nil {
		return err
	}

	if err := c.createNodes(ctx); err != nil {
		return err
	}
	if err := c.waitFor(ctx, clusterReadyTimeout, "every node to be Ready", kwok, c.nodesReady); err != nil {
		return err
	}
	return c.waitForDefaultServiceAccount(ctx, "default", cm)
}

// CreateNamespace creates ns and waits until the controller-manager has made its default
// ServiceAccount: until then the API server refuses any pod there ("error looking up service
// account"), which after an API server outage lasts as long as the controllers' watches back off
// (seconds, up to half a minute), not the fraction of a second the admission plugin waits.
func (c *Cluster) CreateNamespace(ctx context.Context, ns *corev1.Namespace) (*corev1.Namespace, error) {
	created, err := c.clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return created, c.WaitForDefaultServiceAccount(ctx, created.Name)
}

// WaitForDefaultServiceAccount waits until namespace's default ServiceAccount exists (see
// CreateNamespace), for a namespace created by someone else, such as opi.
func (c *Cluster) WaitForDefaultServiceAccount(ctx context.Context, namespace string) error {
	cm := c.running("kube-controller-manager")
	if cm == nil {
		return errors.New("waiting for a default ServiceAccount: kube-controller-manager is not running")
	}
	return c.waitForDefaultServiceAccount(ctx, namespace, cm)
}

func (c *Cluster) waitForDefaultServiceAccount(ctx context.Context, namespace string, cm *process) error {
	return c.waitFor(ctx, clusterReadyTimeout, "the default ServiceAccount of namespace "+namespace+" (made by the controller-manager)", cm,
		func(ctx context.Context) (bool, error) {
			_, err := c.clientset.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
			return err == nil, nil
		})
}

// run starts a component from the bin folder and records it for Stop.
func (c *Cluster) run(name string, args ...string) (*process, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return nil, fmt.Errorf("starting %s: the cluster is stopped", name)
	}
	env := os.Environ()
	if name == "kwok" {
		// kwok also loads ~/.kwok/kwok.yaml when it exists; a private HOME keeps a user's own kwok
		// configuration out of our cluster.
		env = append(env, "HOME="+c.workDir)
	}
	p, err := startProcess(name, filepath.Join(c.opts.BinDir, name), args, env, c.opts.Log,
		filepath.Join(c.workDir, "logs", name+".log"))
	if err != nil {
		return nil, err
	}
	p.showLog = c.opts.KeepWorkDir
	c.started = append(c.started, p)
	// A restarted component takes the place of its stopped self, so Stop keeps the start order
	// (clients before the API server before etcd): an API server stopped while its clients still
	// hold watches waits for them, and they for it.
	for i, old := range c.procs {
		if old.name == name && old.exited() {
			c.procs[i] = p
			return p, nil
		}
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// waitFor polls cond until it holds, the timeout passes, ctx ends or proc exits; failures name
// proc and carry its last output lines, since that is where the reason usually is.
func (c *Cluster) waitFor(ctx context.Context, timeout time.Duration, what string, proc *process, cond func(context.Context) (bool, error)) error {
	var lastErr, exited error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		callCtx, callCancel := context.WithTimeout(ctx, 5*time.Second)
		ok, err := cond(callCtx)
		callCancel()
		if ok {
			return true, nil
		}
		if err != nil {
			lastErr = err
		}
		if p := c.exitedComponent(proc); p != nil {
			exited = fmt.Errorf("waiting for %s: %s", what, p.describe())
			return false, exited
		}
		return false, nil
	})
	switch {
	case err == nil:
		return nil
	case exited != nil:
		return exited
	case lastErr != nil:
		return fmt.Errorf("waiting for %s: %w (last error: %v); %s", what, err, lastErr, proc.describe())
	default:
		return fmt.Errorf("waiting for %s: %w; %s", what, err, proc.describe())
	}
}

// exitedComponent returns proc if it has exited, or while starting any component that has.
func (c *Cluster) exitedComponent(proc *process) *process {
	if proc.exited() {
		return proc
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.starting {
		return nil
	}
	for _, p := range c.procs {
		if p.exited() {
			return p
		}
	}
	return nil
}

// StartAPIServer starts kube-apiserver (again, after StopAPIServer) on the cluster's port with its
// certificates and waits until /readyz answers ok.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	if c.apiServer() != nil {
		return errors.New("starting kube-apiserver: it is already running")
	}
	p, err := c.run("kube-apiserver", c.opts.Tuning.apiServerArgs(
		"--etcd-servers", "http://127.0.0.1:"+strconv.Itoa(c.etcdPort),
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(c.apiPort),
		"--cert-dir", filepath.Join(c.workDir, "certs"),
		"--tls-cert-file", c.creds.servingCert,
		"--tls-private-key-file", c.creds.servingKey,
		"--client-ca-file", c.creds.caCert,
		"--service-account-key-file", c.creds.saPub,
		"--service-account-signing-key-file", c.creds.saKey,
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--token-auth-file", c.creds.tokenFile,
		"--authorization-mode", "RBAC,Node",
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--allow-privileged=true",
		// On SIGTERM the API server otherwise waits up to a minute for its clients' watches to
		// end; closing them is what a client sees of a restarting API server anyway.
		"--shutdown-watch-termination-grace-period", "2s",
	)...)
	if err != nil {
		return err
	}
	return c.waitFor(ctx, apiServerReadyTimeout, "kube-apiserver /readyz", p, func(ctx context.Context) (bool, error) {
		body, err := c.clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return false, err
		}
		return string(body) == "ok", nil
	})
}

// StopAPIServer stops kube-apiserver (SIGTERM, then SIGKILL after 10 s) and leaves the rest
// running, to test how clients ride out an API server outage.
func (c *Cluster) StopAPIServer() error {
	api := c.apiServer()
	if api == nil {
		return errors.New("stopping kube-apiserver: it is not running")
	}
	return api.stop(stopTimeout)
}

// Stop stops every component in reverse start order (SIGTERM to its process group, SIGKILL after
// 10 s) and removes the work and exec folders unless Options.KeepWorkDir. Calling it again does nothing.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	procs := c.procs
	c.procs = nil
	c.mu.Unlock()

	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		if err := procs[i].stop(stopTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	if !c.opts.KeepWorkDir {
		if err := os.RemoveAll(c.workDir); err != nil {
			errs = append(errs, fmt.Errorf("removing the work folder: %w", err))
		}
		if c.execDir != "" {
			if err := os.RemoveAll(c.execDir); err != nil {
				errs = append(errs, fmt.Errorf("removing the exec folder: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// Kubeconfig is the path of a kubeconfig for the cluster's admin (verifying the API server's
// certificate against the cluster's own CA).
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// RestConfig returns a copy of the admin client configuration.
func (c *Cluster) RestConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// Clientset is an admin client for the cluster.
func (c *Cluster) Clientset() kubernetes.Interface { return c.clientset }

// WorkDir is the cluster's own folder (data, certificates, kubeconfig and logs).
func (c *Cluster) WorkDir() string { return c.workDir }

// ExecDir is the scratch folder the commands of `kubectl exec` into the simulated pods run in.
func (c *Cluster) ExecDir() string { return c.execDir }

// BinDir is the folder the components were started from (it also holds kubectl).
func (c *Cluster) BinDir() string { return c.opts.BinDir }

// Server is the API server's URL.
func (c *Cluster) Server() string { return c.restConfig.Host }

// PIDs are the process ids of every process the cluster has started, including ones since
// stopped, so tests can check that none outlives Stop.
func (c *Cluster) PIDs() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	pids := make([]int, 0, len(c.started))
	for _, p := range c.started {
		pids = append(pids, p.pid())
	}
	return pids
}

// observable adds to a controller-manager's or scheduler's args a loopback HTTPS server on port
// with the API server's certificate (valid for 127.0.0.1, signed by the cluster CA), so the admin
// client verifies it. /metrics and /debug/pprof skip authorization (they would otherwise cost a
// SubjectAccessReview per scrape, which shows up in the very metrics being read); the caller is
// still authenticated by the admin token (a TokenReview). Skipping the lookup of the API server's
// front-proxy CA, which this API server has none of, spares a "missing content for CA bundle" error
// every few seconds. --profiling is the default, stated so it stays on.
func (c *Cluster) observable(port int, args []string) []string {
	return append(args,
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(port),
		"--tls-cert-file", c.creds.servingCert,
		"--tls-private-key-file", c.creds.servingKey,
		"--authorization-always-allow-paths", "/healthz,/readyz,/livez,/metrics,/debug/pprof/*",
		"--authentication-skip-lookup",
		"--profiling",
	)
}

func (c *Cluster) writeKubeconfig() error {
	server := (&url.URL{Scheme: "https", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(c.apiPort))}).String()
	c.restConfig = &rest.Config{
		Host:            server,
		BearerToken:     c.creds.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.creds.caPEM},
		// client-go's default of 5 requests/s would make the tests measure the client.
		QPS:   200,
		Burst: 400,
	}
	cs, err := kubernetes.NewForConfig(c.RestConfig())
	if err != nil {
		return fmt.Errorf("making the cluster client: %w", err)
	}
	c.clientset = cs

	const name = "localkube"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: c.creds.caPEM}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: c.creds.token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: "default"}
	cfg.CurrentContext = name
	c.kubeconfig = filepath.Join(c.workDir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, c.kubeconfig); err != nil {
		return fmt.Errorf("writing the kubeconfig: %w", err)
	}
	return nil
}

func (c *Cluster) createNodes(ctx context.Context) error {
	res := corev1.ResourceList{}
	for name, q := range map[corev1.ResourceName]string{
		corev1.ResourceCPU:              c.opts.NodeCPU,
		corev1.ResourceMemory:           c.opts.NodeMemory,
		corev1.ResourcePods:             c.opts.NodePods,
		corev1.ResourceEphemeralStorage: c.opts.NodeEphemeralStorage,
	} {
		v, err := resource.ParseQuantity(q)
		if err != nil {
			return fmt.Errorf("parsing the node %s %q: %w", name, q, err)
		}
		res[name] = v
	}
	for i := range c.opts.Nodes {
		name := fmt.Sprintf("localkube-node-%d", i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{NodeAnnotation: "fake"},
				Labels: map[string]string{
					"kubernetes.io/hostname": name,
					"kubernetes.io/os":       "linux",
					"kubernetes.io/arch":     "amd64",
					"type":                   "kwok",
				},
			},
			Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
		}
		if _, err := c.clientset.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating node %s: %w", name, err)
		}
	}
	return nil
}

func (c *Cluster) nodesReady(ctx context.Context) (bool, error) {
	nodes, err := c.clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	ready := 0
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return ready >= c.opts.Nodes, nil
}

// freePorts asks the kernel for n distinct free loopback ports. All listeners stay open until
// every port is chosen, so the kernel cannot hand out the same port twice.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// FreeAddr is a loopback address ("127.0.0.1:port") free at the time of the call, for a server
// started beside the cluster (opi in tests, the benchmark and the load test).
func FreeAddr() (string, error) {
	ports, err := freePorts(1)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0]), nil
}

// apiServer is the running kube-apiserver, or nil.
func (c *Cluster) apiServer() *process { return c.running("kube-apiserver") }

// running returns the component called name if it runs.
func (c *Cluster) running(name string) *process {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.name == name && !p.exited() {
			return p
		}
	}
	return nil
}
