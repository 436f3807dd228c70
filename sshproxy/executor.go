package sshproxy

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/opi-bridge/opi/k8s/names"
)

// podExecutor runs commands in the containers of the namespace's pods through the API
// server's pods/exec: over WebSocket (a GET, which needs get and, since Kubernetes 1.35, create
// on pods/exec), else over SPDY (a POST: create alone) when the upgrade is refused. The API
// server's SPDY relay drops a command's last output and its status when the client's end of
// input crosses the command's end (the relay stops both ways at the first write that fails),
// so a `-c` command would now and then answer nothing with status 0; its WebSocket translation
// does not.
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
	spdy, err := remotecommand.NewSPDYExecutor(e.config, "POST", url)
	if err != nil {
		return fmt.Errorf("making the exec client: %w", err)
	}
	ws, err := remotecommand.NewWebSocketExecutor(e.config, "GET", url.String())
	if err != nil {
		return fmt.Errorf("making the exec client: %w", err)
	}
	// client-go's WebSocket transport reports a refused upgrade as k8s.io/streaming's error type.
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
	if err != nil {
		return fmt.Errorf("making the exec client: %w", err)
	}
	opts := remotecommand.StreamOptions{Stdin: req.Stdin, Stdout: req.Stdout, Stderr: req.Stderr, Tty: req.TTY}
	if req.Sizes != nil {
		opts.TerminalSizeQueue = req.Sizes
	}
	return exec.StreamWithContext(ctx, opts)
}
