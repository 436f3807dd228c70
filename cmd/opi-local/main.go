// Command opi-local runs opi against a real Kubernetes control plane on this machine (see
// package localkube): `opi-local cluster` starts just the control plane, `opi-local run` starts it
// and opi in front of it. Both stop everything on Ctrl-C or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/opi-bridge/opi/localkube"
	"github.com/opi-bridge/opi/testsupport/ccstandin"
	"github.com/opi-bridge/opi/testsupport/registry"
)

const usage = `usage:
  opi-local cluster [--kubeconfig-out .local/kubeconfig] [--nodes N] [flags]
      start a control plane, write its kubeconfig, run until Ctrl-C/SIGTERM
  opi-local run [--opi-bin bin/opi] [--listen 127.0.0.1:8085] [--namespace cf-workloads] [--backend deployments] [flags]
      start a control plane, a Cloud Controller stand-in, an image registry with a sample image,
      and opi connected to them, and opi ssh-proxy with UAA and CC stand-ins; run until Ctrl-C/SIGTERM

Run "opi-local cluster -h" or "opi-local run -h" for every flag.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	switch os.Args[1] {
	case "cluster":
		err = clusterCmd(ctx, os.Args[2:], os.Stdout)
	case "run":
		err = runCmd(ctx, os.Args[2:], os.Stdout)
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "opi-local: unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "opi-local:", err)
		os.Exit(1)
	}
}

// clusterFlags are the control plane's settings, shared by both commands.
type clusterFlags struct {
	kubeconfigOut string
	opts          localkube.Options
}

func addClusterFlags(fs *flag.FlagSet) *clusterFlags {
	f := &clusterFlags{}
	fs.StringVar(&f.kubeconfigOut, "kubeconfig-out", ".local/kubeconfig", "where to copy the cluster's kubeconfig (removed again on stop)")
	fs.IntVar(&f.opts.Nodes, "nodes", 1, "number of simulated nodes")
	fs.StringVar(&f.opts.NodeCPU, "node-cpu", "32", "CPU capacity of each node")
	fs.StringVar(&f.opts.NodeMemory, "node-memory", "256Gi", "memory capacity of each node")
	fs.StringVar(&f.opts.NodePods, "node-pods", "250", "pod capacity of each node")
	fs.StringVar(&f.opts.NodeEphemeralStorage, "node-ephemeral-storage", "1Ti", "ephemeral-storage capacity of each node")
	fs.IntVar(&f.opts.ControllerQPS, "controller-qps", 0, "API requests/s of the controller-manager and scheduler (0: their default of 20)")
	fs.IntVar(&f.opts.ControllerBurst, "controller-burst", 0, "API request burst of the controller-manager and scheduler (0: their default)")
	fs.StringVar(&f.opts.BinDir, "bin-dir", "", "folder of the control plane binaries (default: build them with tools/kube/build.sh)")
	fs.StringVar(&f.opts.WorkDir, "work-dir", ".local", "folder in which the cluster's own folder (data, certs, logs) is made")
	fs.BoolVar(&f.opts.KeepWorkDir, "keep-work-dir", false, "keep the cluster's folder (and its logs) after stopping")
	return f
}

// startCluster starts the control plane and copies its kubeconfig to f.kubeconfigOut.
func startCluster(ctx context.Context, f *clusterFlags, out io.Writer) (*localkube.Cluster, error) {
	fmt.Fprintln(out, "starting the control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)...")
	start := time.Now()
	c, err := localkube.Start(ctx, f.opts)
	if err != nil {
		return nil, err
	}
	if err := copyKubeconfig(c.Kubeconfig(), f.kubeconfigOut); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	fmt.Fprintf(out, "control plane up in %s at %s with %d node(s); component logs in %s\n",
		time.Since(start).Round(100*time.Millisecond), c.Server(), f.opts.Nodes, filepath.Join(c.WorkDir(), "logs"))
	return c, nil
}

// stopCluster stops the control plane and removes the copied kubeconfig, which would otherwise
// point tools at a dead server.
func stopCluster(c *localkube.Cluster, f *clusterFlags, out io.Writer) error {
	fmt.Fprintln(out, "stopping the control plane...")
	err := c.Stop()
	if rmErr := os.Remove(f.kubeconfigOut); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
		err = errors.Join(err, rmErr)
	}
	if err == nil {
		fmt.Fprintln(out, "stopped")
	}
	return err
}

func clusterCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("opi-local cluster", flag.ContinueOnError)
	f := addClusterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := startCluster(ctx, f, out)
	if err != nil {
		return err
	}
	kubectl := filepath.Join(c.BinDir(), "kubectl")
	fmt.Fprintf(out, "\nkubeconfig: %s\n", f.kubeconfigOut)
	fmt.Fprintf(out, "try:        %s --kubeconfig %s get nodes,pods -A\n", kubectl, f.kubeconfigOut)
	fmt.Fprintf(out, "\nCtrl-C or SIGTERM stops the control plane.\n")
	<-ctx.Done()
	return stopCluster(c, f, out)
}

func runCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("opi-local run", flag.ContinueOnError)
	f := addClusterFlags(fs)
	opiBin := fs.String("opi-bin", "bin/opi", "the opi binary to run (make build makes it)")
	listen := fs.String("listen", "127.0.0.1:8085", "address opi listens on")
	namespace := fs.String("namespace", "cf-workloads", "namespace opi puts the apps in")
	backend := fs.String("backend", "deployments", "opi's backend: deployments or statefulsets (passed to opi as --backend)")
	routing := fs.String("routing", "", "opi's routing mode (passed to opi as --routing; default opi's, ingress); nats also starts a NATS server on loopback and prints what opi sends on router.*")
	withAgent := fs.Bool("agent", false, "also run opi agent for each node against a Loggregator stand-in, with a kubelet stand-in writing the pods' log files")
	sshListen := fs.String("ssh-listen", "127.0.0.1:2222", "address opi ssh-proxy listens on")
	sshRBAC := fs.String("ssh-proxy-rbac", "deploy/kustomize/components/ssh-proxy/rbac.yaml", "the ssh-proxy component's Role, which the proxy runs with")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, err := os.Stat(*opiBin); err != nil {
		return fmt.Errorf("checking the opi binary (make build makes bin/opi): %w", err)
	}
	// kwok reads its configuration once, at start: the instances' port is forwarded from then.
	appPortServer, kwokConfig := startAppPort(*namespace)
	defer appPortServer.Close()
	f.opts.KwokConfig = kwokConfig

	c, err := startCluster(ctx, f, out)
	if err != nil {
		return err
	}
	// Everything started from here on is stopped in reverse order on the way out.
	var stops []func() error
	stopAll := func() error {
		var errs []error
		for i := len(stops) - 1; i >= 0; i-- {
			errs = append(errs, stops[i]())
		}
		return errors.Join(append(errs, stopCluster(c, f, out))...)
	}

	local, err := startCCAndRegistry(filepath.Join(c.WorkDir(), "cc-standin"), out)
	if local != nil {
		stops = append(stops, local.close)
	}
	if err != nil {
		return errors.Join(err, stopAll())
	}

	opiArgs := append([]string{"connect", "--kubeconfig", f.kubeconfigOut, "--listen", *listen, "--namespace", *namespace, "--backend", *backend},
		local.cc.OpiArgs()...)
	var natsURL string
	if *routing == "nats" {
		n, err := startNATS(out)
		if n != nil {
			stops = append(stops, n.close)
		}
		if err != nil {
			return errors.Join(err, stopAll())
		}
		opiArgs, natsURL = append(opiArgs, n.OpiArgs()...), n.URL()
	} else if *routing != "" {
		opiArgs = append(opiArgs, "--routing", *routing)
	}
	agentOpts := agentOptions{opiBin: *opiBin, kubeconfig: f.kubeconfigOut, namespace: *namespace, backend: *backend, dir: filepath.Join(c.WorkDir(), "agent")}
	var la *localAgent
	if *withAgent {
		if la, err = startStandins(c.Clientset(), agentOpts, out); la != nil {
			stops = append(stops, la.close)
		}
		if err != nil {
			return errors.Join(err, stopAll())
		}
		opiArgs = append(opiArgs, la.opiArgs()...)
	}
	// opi refuses loopback registries unless allowed: the local registry is, explicitly.
	opiArgs = append(opiArgs, registry.OpiArgs(local.registry)...)
	// The guide's crash example annotates a pod with localkube.CrashAnnotation.
	opiArgs = append(opiArgs, "--user-annotation-prefixes", "prometheus.io/,"+localkube.AnnotationPrefix)
	fmt.Fprintf(out, "starting %s %s\n", *opiBin, strings.Join(opiArgs, " "))
	opi, err := localkube.StartProcess("opi", *opiBin, opiArgs, os.Environ(), out, "")
	if err != nil {
		return errors.Join(err, stopAll())
	}
	stops = append(stops, func() error {
		fmt.Fprintln(out, "stopping opi...")
		return opi.Stop()
	})
	base := "http://" + *listen
	if err := opi.WaitHTTP(ctx, base+"/readyz", 2*time.Minute); err != nil {
		return errors.Join(fmt.Errorf("waiting for opi to be ready: %w", err), stopAll())
	}
	var agentInfo *agentGuide
	var agentDone <-chan struct{}
	if la != nil {
		if err := la.startAgents(ctx, c.Clientset(), agentOpts, out); err != nil {
			return errors.Join(fmt.Errorf("starting the agents: %w", err), stopAll())
		}
		agentInfo, agentDone = &la.guide, la.done()
	}
	sshOpts := sshOptions{opiBin: *opiBin, namespace: *namespace, backend: *backend, listen: *sshListen, rbac: *sshRBAC,
		dir: filepath.Join(c.WorkDir(), "ssh-proxy")}
	if la != nil {
		sshOpts.lines = la.opiArgs()
	}
	proxy, err := startSSHProxy(ctx, c, sshOpts, out)
	if err != nil {
		return errors.Join(fmt.Errorf("starting the ssh proxy: %w", err), stopAll())
	}
	stops = append(stops, func() error {
		fmt.Fprintln(out, "stopping the ssh proxy...")
		return proxy.Stop()
	})
	printGuide(out, guide{
		Base: base, Kubectl: filepath.Join(c.BinDir(), "kubectl"), Kubeconfig: f.kubeconfigOut, Namespace: *namespace,
		CCURL: local.cc.URL, CCCA: local.cc.CAFile, CCCert: local.cc.ClientCertFile, CCKey: local.cc.ClientKeyFile,
		Image: local.image, NATSURL: natsURL, Agent: agentInfo, SSH: &sshGuide{proxy: proxy, lines: la != nil},
	})

	var runErr error
	select {
	case <-ctx.Done():
	case <-opi.Done():
		runErr = fmt.Errorf("opi exited: %v", opi.Err())
	case <-proxy.Done():
		runErr = fmt.Errorf("the ssh proxy exited: see %s", proxy.Log)
	case <-agentDone:
		runErr = errors.New("an opi agent exited: see its log")
	}
	return errors.Join(runErr, stopAll())
}

// localCC is what `make run` starts beside the control plane so that callbacks can be tried:
// a Cloud Controller stand-in (mutual TLS, certificates in dir) that prints each callback with a
// "cc-standin:" prefix, and an image registry holding a small sample image for staging.
type localCC struct {
	cc       *ccstandin.Server
	registry *registry.Registry
	image    string
}

func startCCAndRegistry(dir string, out io.Writer) (*localCC, error) {
	standin, err := ccstandin.Start(ccstandin.Options{TLS: true, Dir: dir, Log: out})
	if err != nil {
		return nil, fmt.Errorf("starting the cloud controller stand-in: %w", err)
	}
	l := &localCC{cc: standin}
	if l.registry, err = registry.Start(registry.Options{}); err != nil {
		return l, fmt.Errorf("starting the image registry: %w", err)
	}
	l.image, err = l.registry.Push("sample/hello:latest", registry.Image{
		Cmd: []string{"httpd", "-f", "-p", "8080"}, WorkingDir: "/www", User: "1000", ExposedPorts: []string{"8080/tcp"},
	})
	if err != nil {
		return l, fmt.Errorf("pushing the sample image: %w", err)
	}
	fmt.Fprintf(out, "cloud controller stand-in at %s, image registry at %s\n", standin.URL, l.registry.Host)
	return l, nil
}

func (l *localCC) close() error {
	var errs []error
	if l.registry != nil {
		errs = append(errs, l.registry.Close())
	}
	return errors.Join(append(errs, l.cc.Close())...)
}

func copyKubeconfig(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return fmt.Errorf("creating the kubeconfig folder: %w", err)
	}
	// Written under a temporary name and renamed, so whoever waits for the file (make cluster)
	// never reads half of it.
	tmp := to + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing the kubeconfig: %w", err)
	}
	if err := os.Rename(tmp, to); err != nil {
		return fmt.Errorf("writing the kubeconfig: %w", err)
	}
	return nil
}
