package sshproxy

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/opi-bridge/opi/k8s/names"
)

// podExecutor runs commands in the containers of the namespace's pods through the API
// server's pods/exec, over SPDY: its POST needs only create on pods/exec, where the WebSocket
// upgrade (a GET) also needs get, a right the proxy's Role need not have.
type podExecutor struct {
	config    *rest.Config
	client    rest.Interface
	namespace string
}

// NewPodExecutor is the Executor of the namespace's pods, with the client configuration's
// identity (which needs create on pods/exec there).
func NewPodExecutor(config *rest.Config, namespace string) (Executor, error) {
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("making the exec client: %w", err)
	}
	return &podExecutor{config: config, client: client.CoreV1().RESTClient(), namespace: namespace}, nil
}

// Exec runs req's command in its pod's container.
func (e *podExecutor) Exec(ctx context.Context, req ExecRequest) error {
	container := req.Container
	if container == "" {
		container = names.ContainerName
	}
	url := e.client.Post().Namespace(e.namespace).Resource("pods").Name(req.Pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{
			Container: container,
			Command:   req.Command,
			Stdin:     req.Stdin != nil,
			Stdout:    req.Stdout != nil,
			Stderr:    req.Stderr != nil,
			TTY:       req.TTY,
		}, scheme.ParameterCodec).URL()
	exec, err := remotecommand.NewSPDYExecutor(e.config, "POST", url)
	if err != nil {
		return fmt.Errorf("making the exec client: %w", err)
	}
	opts := remotecommand.StreamOptions{Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr, Tty: req.TTY}
	if req.Sizes != nil {
		opts.TerminalSizeQueue = req.Sizes
	}
	return exec.StreamWithContext(ctx, opts)
}
