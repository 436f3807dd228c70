package localkube

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// CRDsFile is the name, in the bin folder, of the definition of kwok's PortForward resource
// (build.sh writes it from the pinned kwok module).
const CRDsFile = "kwok-crds.yaml"

// kwokCRDs are the kinds kwok reads from the API server rather than from its configuration
// files: port-forward rules belong to the tests that need them, made while kwok runs.
const kwokCRDs = "PortForward"

var (
	crdResource         = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	portForwardResource = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "portforwards"}
)

// fieldManager names localkube's writes in the objects' managed fields.
const fieldManager = "localkube"

// Forward says where kwok sends the connections of a port-forward to one port of a simulated
// pod: to Address ("host:port" on this machine), or, with Command set, to a command run on this
// machine whose stdin and stdout are the connection.
type Forward struct {
	Port    int32
	Address string
	Command []string
}

// ForwardPorts makes kwok answer port-forwards to the pod's ports as forwards say (a kwok
// PortForward named as the pod, replacing the pod's earlier one); any other port of the pod
// gets kwok's refusal. kwok learns of it through a watch, so a port-forward opened right after
// may still be refused: callers retry their first connection. The rule goes with its namespace.
func (c *Cluster) ForwardPorts(ctx context.Context, namespace, pod string, forwards ...Forward) error {
	if len(forwards) == 0 {
		return errors.New("forwarding ports: no forward given")
	}
	var list []any
	for _, f := range forwards {
		entry := map[string]any{"ports": []any{int64(f.Port)}}
		switch {
		case len(f.Command) > 0:
			cmd := make([]any, len(f.Command))
			for i, a := range f.Command {
				cmd[i] = a
			}
			entry["command"] = cmd
		case f.Address != "":
			host, port, err := net.SplitHostPort(f.Address)
			if err != nil {
				return fmt.Errorf("forwarding port %d: %w", f.Port, err)
			}
			p, err := strconv.ParseInt(port, 10, 32)
			if err != nil {
				return fmt.Errorf("forwarding port %d: the target's port: %w", f.Port, err)
			}
			entry["target"] = map[string]any{"address": host, "port": p}
		default:
			return fmt.Errorf("forwarding port %d: neither an address nor a command", f.Port)
		}
		list = append(list, entry)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": portForwardResource.GroupVersion().String(),
		"kind":       "PortForward",
		"metadata":   map[string]any{"name": pod, "namespace": namespace},
		"spec":       map[string]any{"forwards": list},
	}}
	client, err := dynamic.NewForConfig(c.RestConfig())
	if err != nil {
		return fmt.Errorf("making the dynamic client: %w", err)
	}
	_, err = client.Resource(portForwardResource).Namespace(namespace).Apply(ctx, pod, obj,
		metav1.ApplyOptions{FieldManager: fieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("applying the port-forward rule of pod %s/%s: %w", namespace, pod, err)
	}
	return nil
}

// installCRDs creates the resource definitions kwok watches (CRDsFile) and waits until the API
// server serves them: kwok lists them once at start and gives up on a kind it cannot list.
func (c *Cluster) installCRDs(ctx context.Context) error {
	data, err := os.ReadFile(filepath.Join(c.opts.BinDir, CRDsFile))
	if err != nil {
		return fmt.Errorf("reading kwok's resource definitions: %w", err)
	}
	client, err := dynamic.NewForConfig(c.RestConfig())
	if err != nil {
		return fmt.Errorf("making the dynamic client: %w", err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var names []string
	for {
		var crd unstructured.Unstructured
		if err := dec.Decode(&crd.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("decoding kwok's resource definitions: %w", err)
		}
		if crd.Object == nil {
			continue
		}
		if _, err := client.Resource(crdResource).Apply(ctx, crd.GetName(), &crd,
			metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return fmt.Errorf("creating the resource definition %s: %w", crd.GetName(), err)
		}
		names = append(names, crd.GetName())
	}
	api := c.apiServer()
	if api == nil {
		return errors.New("installing kwok's resource definitions: kube-apiserver is not running")
	}
	return c.waitFor(ctx, clusterReadyTimeout, "kwok's resource definitions to be established", api,
		func(ctx context.Context) (bool, error) {
			for _, name := range names {
				crd, err := client.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if !established(crd) {
					return false, nil
				}
			}
			return true, nil
		})
}

// established says whether a resource definition's Established condition is True.
func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// KubectlPortForward starts `kubectl port-forward` to the pod's port, listening on a loopback
// port kubectl picks, and returns it with that address once it listens; the caller ends it
// (Process.Kill, then Wait). kubectl ends by itself when a forwarded connection fails.
func (c *Cluster) KubectlPortForward(namespace, pod string, port int) (*exec.Cmd, string, error) {
	cmd := exec.Command(filepath.Join(c.opts.BinDir, "kubectl"), "--kubeconfig", c.kubeconfig,
		"-n", namespace, "port-forward", "--address", "127.0.0.1", "pod/"+pod, ":"+strconv.Itoa(port))
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", fmt.Errorf("starting kubectl port-forward: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("starting kubectl port-forward: %w", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	m := regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+) -> ` + strconv.Itoa(port)).FindStringSubmatch(line)
	if err != nil || m == nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, "", fmt.Errorf("kubectl port-forward said %q: %v", line, err)
	}
	// kubectl writes a line per connection; unread, they would fill the pipe and stop it.
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return cmd, m[1], nil
}
