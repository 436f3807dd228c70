package localkube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"k8s.io/client-go/rest"
)

// The component names Components and Get know.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
	Kwok              = "kwok"
)

// Components maps the name of every running component (Etcd, APIServer, ControllerManager,
// Scheduler, Kwok) to its process id, for reading its CPU time from /proc.
func (c *Cluster) Components() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	pids := make(map[string]int, len(c.procs))
	for _, p := range c.procs {
		if !p.exited() {
			pids[p.name] = p.pid()
		}
	}
	return pids
}

// Get fetches path (with its query, e.g. "/metrics" or "/debug/pprof/profile?seconds=30") from a
// component's own server. The API server, controller-manager and scheduler are asked over HTTPS
// as the cluster admin, verified against the cluster CA; etcd and kwok serve plain HTTP on
// loopback and get no credentials. Any answer but 200 OK is an error. ctx bounds the whole call,
// a CPU profile's seconds included.
func (c *Cluster) Get(ctx context.Context, component, path string) ([]byte, error) {
	var (
		base   string
		client *http.Client
	)
	switch component {
	case APIServer, ControllerManager, Scheduler:
		port := map[string]int{APIServer: c.apiPort, ControllerManager: c.cmPort, Scheduler: c.schedPort}[component]
		base = "https://127.0.0.1:" + strconv.Itoa(port)
		cl, err := rest.HTTPClientFor(c.RestConfig())
		if err != nil {
			return nil, fmt.Errorf("making a client for %s: %w", component, err)
		}
		client = cl
	case Etcd:
		base, client = "http://127.0.0.1:"+strconv.Itoa(c.etcdPort), http.DefaultClient
	case Kwok:
		base, client = "http://127.0.0.1:"+strconv.Itoa(c.kwokPort), http.DefaultClient
	default:
		return nil, fmt.Errorf("getting %s: no component %q", path, component)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("getting %s%s: %w", component, path, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("getting %s%s: %w", component, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading %s%s: %w", component, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		const max = 512
		if len(body) > max {
			body = body[:max]
		}
		return nil, fmt.Errorf("getting %s%s: %s: %s", component, path, resp.Status, body)
	}
	return body, nil
}
