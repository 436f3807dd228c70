package sshproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// Stream is one side of a tunnel: an SSH channel, whose write side closes apart.
type Stream interface {
	io.ReadWriter
	CloseWrite() error
}

// Forwarder carries a tunnel's bytes to a port of a pod (pods/portforward).
//
//counterfeiter:generate . Forwarder
type Forwarder interface {
	// Forward copies between s and the pod's port until the pod's side ends or ctx does.
	Forward(ctx context.Context, pod string, port uint16, s Stream) error
}

// DialPod opens a port-forward connection to a pod.
type DialPod func(pod string) (httpstream.Connection, error)

// podForwarder forwards through the API server's pods/portforward, one connection and one
// stream pair (error, data) per tunnel, as kubectl port-forward does per accepted connection.
type podForwarder struct{ dial DialPod }

// NewPodForwarder is the Forwarder of the namespace's pods, with the client configuration's
// identity (which needs create on pods/portforward there), over SPDY (a POST).
func NewPodForwarder(config *rest.Config, namespace string) (Forwarder, error) {
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("making the port-forward client: %w", err)
	}
	transport, upgrader, err := spdy.RoundTripperFor(config)
	if err != nil {
		return nil, fmt.Errorf("making the port-forward client: %w", err)
	}
	rc := client.CoreV1().RESTClient()
	return NewForwarder(func(pod string) (httpstream.Connection, error) {
		url := rc.Post().Namespace(namespace).Resource("pods").Name(pod).SubResource("portforward").URL()
		dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
		conn, _, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
		return conn, err
	}), nil
}

// NewForwarder is a Forwarder over the connections dial opens.
func NewForwarder(dial DialPod) Forwarder { return &podForwarder{dial: dial} }

// Forward opens the tunnel's stream pair and copies both ways; the error stream carries the
// kubelet's reason when the port cannot be reached.
func (f *podForwarder) Forward(ctx context.Context, pod string, port uint16, s Stream) error {
	conn, err := f.dial(pod)
	if err != nil {
		return fmt.Errorf("opening the port-forward: %w", err)
	}
	defer conn.Close()
	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, strconv.Itoa(int(port)))
	headers.Set(corev1.PortForwardRequestIDHeader, "0")
	errStream, err := conn.CreateStream(headers)
	if err != nil {
		return fmt.Errorf("creating the error stream: %w", err)
	}
	// The proxy writes nothing on the error stream; only the kubelet does.
	_ = errStream.Close()
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(headers)
	if err != nil {
		return fmt.Errorf("creating the data stream: %w", err)
	}
	// The error stream's end, with the kubelet's reason if it wrote one (nil if not).
	failed := make(chan error, 1)
	go func() {
		msg, err := io.ReadAll(errStream)
		switch {
		case len(msg) > 0:
			failed <- fmt.Errorf("port %d: %s", port, msg)
		case err != nil:
			failed <- fmt.Errorf("reading the error stream: %w", err)
		default:
			failed <- nil
		}
	}()
	return splice(ctx, s, data, data, failed)
}

// splice copies between the client's stream s and the far side (r, w) until the far side's
// output ends or ctx does. The client's EOF closes w. failed, when not nil, ends once with the
// far side's reason for failing (nil: none), which wins over a plain end of its output.
func splice(ctx context.Context, s Stream, r io.Reader, w io.WriteCloser, failed <-chan error) error {
	go func() {
		defer w.Close()
		_, _ = io.Copy(w, s)
	}()
	fromFar := make(chan error, 1)
	go func() {
		_, err := io.Copy(s, r)
		_ = s.CloseWrite()
		fromFar <- err
	}()
	select {
	case err := <-failed:
		if err != nil {
			return err
		}
		select {
		case err := <-fromFar:
			return err
		case <-ctx.Done():
			return nil
		}
	case err := <-fromFar:
		if failed == nil {
			return err
		}
		// A kubelet may end the data stream before it writes its reason (kwok does), and ends
		// the error stream right after: a reason that comes wins over a plain end.
		select {
		case ferr := <-failed:
			if ferr != nil {
				return ferr
			}
		case <-time.After(errorStreamGrace):
		case <-ctx.Done():
		}
		return err
	case <-ctx.Done():
		return nil
	}
}

// errorStreamGrace bounds the wait for the error stream's end once the data stream ended.
const errorStreamGrace = 5 * time.Second

// directTCPIP is RFC 4254's "direct-tcpip" payload: where the client wants to reach.
type directTCPIP struct {
	Host       string
	Port       uint32
	OriginHost string
	OriginPort uint32
}

// tunnel serves a direct-tcpip channel: to a port of the granted instance itself through
// pods/portforward, to any other host through the relay, which dials from inside the instance's
// pod. The proxy never dials from its own network position.
func (s *Server) tunnel(ctx context.Context, g *grant, newCh ssh.NewChannel, logger lager.Logger) {
	var req directTCPIP
	if err := ssh.Unmarshal(newCh.ExtraData(), &req); err != nil {
		_ = newCh.Reject(ssh.ConnectionFailed, "malformed direct-tcpip request")
		return
	}
	if s.d.Forwarder == nil {
		_ = newCh.Reject(ssh.Prohibited, "opi ssh-proxy: tunnels are not enabled")
		return
	}
	p, ok := s.d.Instances.Pod(g.pod.name)
	if !ok || string(p.UID) != g.pod.uid || p.DeletionTimestamp != nil || p.Terminal {
		_ = newCh.Reject(ssh.ConnectionFailed, fmt.Sprintf("opi ssh-proxy: instance %d is gone", g.index))
		return
	}
	target := net.JoinHostPort(truncate(req.Host, 120), strconv.Itoa(int(req.Port)))
	if !isInstanceHost(req.Host, p.IP) {
		s.relayTunnel(ctx, g, newCh, req, target, logger)
		return
	}
	if req.Port == 0 || req.Port > 65535 {
		_ = newCh.Reject(ssh.Prohibited, "opi ssh-proxy: no such port: "+target)
		return
	}
	ch, reqs, err := newCh.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	go ssh.DiscardRequests(reqs)
	if err := s.d.Forwarder.Forward(ctx, g.pod.name, uint16(req.Port), ch); err != nil && !errors.Is(err, io.EOF) {
		logger.Info("tunnel-failed", lager.Data{"port": req.Port, "error": err.Error()})
	}
}

// relayTunnel serves a tunnel to another host through the relay; the channel is accepted only
// once the relay connected, so a failure reaches the client as the channel's refusal.
func (s *Server) relayTunnel(ctx context.Context, g *grant, newCh ssh.NewChannel, req directTCPIP, target string, logger lager.Logger) {
	if s.d.Relay == nil {
		_ = newCh.Reject(ssh.Prohibited, fmt.Sprintf(
			"opi ssh-proxy: tunnels reach only the instance's own ports (localhost or its IP), not %s: tunnels to other hosts are turned off", target))
		return
	}
	if err := CheckRelayTarget(req.Host, int(req.Port)); err != nil {
		_ = newCh.Reject(ssh.Prohibited, "opi ssh-proxy: cannot tunnel to "+target+": "+err.Error())
		return
	}
	conn, err := s.d.Relay.Open(ctx, g.pod.name, g.pod.uid, req.Host, uint16(req.Port))
	if err != nil {
		logger.Info("relay-refused", lager.Data{"target": target, "reason": err.Error()})
		_ = newCh.Reject(ssh.ConnectionFailed, fmt.Sprintf("opi ssh-proxy: cannot reach %s from instance %d: %v", target, g.index, err))
		return
	}
	defer conn.Close()
	ch, reqs, err := newCh.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	go ssh.DiscardRequests(reqs)
	if err := splice(ctx, ch, conn, closeWriter{conn}, nil); err != nil && !errors.Is(err, io.EOF) {
		logger.Info("tunnel-failed", lager.Data{"target": target, "error": err.Error()})
	}
}

// closeWriter is a RelayConn whose Close ends only what is sent (the client's EOF).
type closeWriter struct{ RelayConn }

func (c closeWriter) Close() error { return c.CloseWrite() }

// isInstanceHost says whether host names the instance itself: the loopback names, or its IP.
func isInstanceHost(host, podIP string) bool {
	switch host {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return podIP != "" && host == podIP
}
