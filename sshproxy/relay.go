package sshproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/names"
)

// Relay carries tunnels to hosts other than the instance itself: it dials from inside the
// instance's pod, so the pod's network rules (the app's NetworkPolicies) decide what a tunnel
// reaches, never the proxy's own network position.
type Relay interface {
	// Open dials host:port from inside the pod (name and uid: the granted instance's). Its
	// error's text is the reason the user is given.
	Open(ctx context.Context, pod, uid, host string, port uint16) (RelayConn, error)
}

// RelayConn is one open relayed connection.
type RelayConn interface {
	io.ReadWriteCloser
	// CloseWrite ends what is sent to the far host (the client's EOF).
	CloseWrite() error
}

// RelayOptions are the relay container's settings.
type RelayOptions struct {
	// Image is the relay container's image: opi's own, whose binary has the relay subcommand.
	Image string
	// Binary is the path of opi's binary in Image.
	Binary string
	// DialTimeout bounds each dial from the pod (default DefaultRelayDialTimeout).
	DialTimeout time.Duration
	// StartTimeout bounds how long a new relay container may take to run, its image pulled
	// (default DefaultRelayStartTimeout).
	StartTimeout time.Duration
}

// Defaults of the relay's bounds and binary.
const (
	DefaultRelayBinary       = "/opi"
	DefaultRelayDialTimeout  = 10 * time.Second
	DefaultRelayStartTimeout = time.Minute
)

// relayUID is the user and group the relay container runs as: the opi image's non-root user.
const relayUID = 65532

// relayPollPeriod is how often a relay container's start is checked.
const relayPollPeriod = 250 * time.Millisecond

// relayReadyGrace is how long, past the dial timeout, an exec may take to say it connected.
const relayReadyGrace = 15 * time.Second

// maxRelayLine bounds the line the dial subcommand answers with.
const maxRelayLine = 1024

// maxRunningRelays bounds the pods whose running relay container is remembered; past it, one is
// forgotten (its next tunnel reads its pod again).
const maxRunningRelays = 4096

// podRelay adds one ephemeral container of opi's image to a pod the first time a tunnel needs
// it (patch on pods/ephemeralcontainers) and runs each tunnel's dial as an exec into it.
type podRelay struct {
	pods kubernetesPods
	exec Executor
	o    RelayOptions

	mu     sync.Mutex
	perPod map[types.UID]*podLock
	// running are the pods (by uid: a replaced pod's is new) whose relay container was seen
	// running: their tunnels dial at once, without reading the pod.
	running map[types.UID]struct{}
}

// kubernetesPods is the pods client of the apps' namespace.
type kubernetesPods interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Pod, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Pod, error)
}

// podLock serialises a pod's tunnels while its relay container is added, so a pod gets one
// however many tunnels open at once; n counts who holds or waits for it.
type podLock struct {
	sync.Mutex
	n int
}

// NewPodRelay is the Relay of the namespace's pods; the client's identity needs get on pods,
// patch on pods/ephemeralcontainers and create on pods/exec there (exec: through exec).
func NewPodRelay(client kubernetes.Interface, namespace string, exec Executor, o RelayOptions) Relay {
	if o.Binary == "" {
		o.Binary = DefaultRelayBinary
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultRelayDialTimeout
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultRelayStartTimeout
	}
	return &podRelay{
		pods: client.CoreV1().Pods(namespace), exec: exec, o: o,
		perPod: map[types.UID]*podLock{}, running: map[types.UID]struct{}{},
	}
}

// RelayContainer is the ephemeral container the relay adds: opi's binary idling, meeting Pod
// Security's restricted level (it shares the app's network namespace, nothing else).
func RelayContainer(o RelayOptions) corev1.EphemeralContainer {
	return corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name:                     names.RelayContainerName,
		Image:                    o.Image,
		Command:                  []string{o.Binary, RelayCommand, RelayIdle},
		ImagePullPolicy:          corev1.PullIfNotPresent,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true),
			RunAsUser:                ptr.To[int64](relayUID),
			RunAsGroup:               ptr.To[int64](relayUID),
			AllowPrivilegeEscalation: ptr.To(false),
			ReadOnlyRootFilesystem:   ptr.To(true),
			Privileged:               ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}}
}

// Open dials through the pod's relay container, first making sure it runs unless it was seen
// running. A dial whose exec fails before the relay answers forgets the container (it may be
// gone: the pod deleted or replaced, the container ended); the pod is then read again as for a
// first tunnel, which names the reason or, the container still running, dials anew.
func (r *podRelay) Open(ctx context.Context, pod, uid, host string, port uint16) (RelayConn, error) {
	id := types.UID(uid)
	if r.isRunning(id) {
		conn, err := r.dial(ctx, pod, host, port)
		if !errors.As(err, new(relayExecFailed)) {
			return conn, err
		}
		r.forget(id)
	}
	if err := r.ensure(ctx, pod, id); err != nil {
		return nil, err
	}
	conn, err := r.dial(ctx, pod, host, port)
	if errors.As(err, new(relayExecFailed)) {
		r.forget(id)
	}
	return conn, err
}

func (r *podRelay) isRunning(uid types.UID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.running[uid]
	return ok
}

// remember notes that the pod's relay container runs.
func (r *podRelay) remember(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.running) >= maxRunningRelays {
		for old := range r.running {
			delete(r.running, old)
			break
		}
	}
	r.running[uid] = struct{}{}
}

func (r *podRelay) forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, uid)
}

// lock takes the pod's lock and returns its release.
func (r *podRelay) lock(uid types.UID) func() {
	r.mu.Lock()
	l := r.perPod[uid]
	if l == nil {
		l = &podLock{}
		r.perPod[uid] = l
	}
	l.n++
	r.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		r.mu.Lock()
		if l.n--; l.n == 0 {
			delete(r.perPod, uid)
		}
		r.mu.Unlock()
	}
}

// errInstanceGone ends a tunnel whose pod went while its relay was being readied.
var errInstanceGone = refuse("the instance is gone")

// ensure adds the pod's relay container unless it has one, and waits until it runs; it remembers
// that it does. A tunnel that waited while another readied it reads nothing.
func (r *podRelay) ensure(ctx context.Context, pod string, uid types.UID) error {
	defer r.lock(uid)()
	if r.isRunning(uid) {
		return nil
	}
	added := false
	var waiting string
	err := wait.PollUntilContextTimeout(ctx, relayPollPeriod, r.o.StartTimeout, true, func(ctx context.Context) (bool, error) {
		p, err := r.pods.Get(ctx, pod, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, errInstanceGone
		case err != nil:
			return false, fmt.Errorf("reading the pod: %w", err)
		case p.UID != uid || p.DeletionTimestamp != nil:
			return false, errInstanceGone
		}
		if !hasRelay(p) {
			if added {
				return false, nil
			}
			added = true
			return false, r.add(ctx, pod, uid)
		}
		st := relayStatus(p)
		switch {
		case st == nil:
			return false, nil
		case st.State.Running != nil:
			return true, nil
		case st.State.Terminated != nil:
			return false, refuse("the relay container in the instance has ended (%s)", stateReason(st.State.Terminated.Reason, st.State.Terminated.Message))
		case st.State.Waiting != nil:
			waiting = stateReason(st.State.Waiting.Reason, st.State.Waiting.Message)
		}
		return false, nil
	})
	var ref *refusal
	switch {
	case err == nil:
		r.remember(uid)
		return nil
	case errors.As(err, &ref):
		return err
	case wait.Interrupted(err) && ctx.Err() == nil:
		if waiting != "" {
			return refuse("the relay container in the instance did not start within %s (%s)", r.o.StartTimeout, waiting)
		}
		return refuse("the relay container in the instance did not start within %s", r.o.StartTimeout)
	default:
		return err
	}
}

// add patches the relay container into the pod; the patch carries the pod's uid, so a new pod of
// the same name is never changed.
func (r *podRelay) add(ctx context.Context, pod string, uid types.UID) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": uid},
		"spec":     map[string]any{"ephemeralContainers": []corev1.EphemeralContainer{RelayContainer(r.o)}},
	})
	if err != nil {
		return fmt.Errorf("encoding the relay container: %w", err)
	}
	_, err = r.pods.Patch(ctx, pod, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "opi-ssh-proxy"}, "ephemeralcontainers")
	if err == nil {
		return nil
	}
	// Another proxy may have added it meanwhile.
	if p, gerr := r.pods.Get(ctx, pod, metav1.GetOptions{}); gerr == nil && p.UID == uid && hasRelay(p) {
		return nil
	}
	reason := err.Error()
	if apierrors.IsNotFound(err) {
		reason = "the cluster does not serve ephemeral containers"
	}
	return refuse("tunnels to other hosts need a relay container in the instance, which could not be added: %s", truncate(reason, 300))
}

func hasRelay(p *corev1.Pod) bool {
	for _, c := range p.Spec.EphemeralContainers {
		if c.Name == names.RelayContainerName {
			return true
		}
	}
	return false
}

func relayStatus(p *corev1.Pod) *corev1.ContainerStatus {
	for i := range p.Status.EphemeralContainerStatuses {
		if p.Status.EphemeralContainerStatuses[i].Name == names.RelayContainerName {
			return &p.Status.EphemeralContainerStatuses[i]
		}
	}
	return nil
}

func stateReason(reason, message string) string {
	if message == "" {
		return reason
	}
	return truncate(reason+": "+message, 300)
}

// dial runs the dial subcommand in the pod's relay container and waits for its first line on
// stderr: connected, or why not.
func (r *podRelay) dial(ctx context.Context, pod, host string, port uint16) (RelayConn, error) {
	ctx, cancel := context.WithCancel(ctx)
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	first := newFirstLine()
	ended := make(chan error, 1)
	go func() {
		err := r.exec.Exec(ctx, ExecRequest{
			Pod: pod, Container: names.RelayContainerName,
			Command: []string{r.o.Binary, RelayCommand, RelayDial, "--timeout", r.o.DialTimeout.String(), "--", host, strconv.Itoa(int(port))},
			Stdin:   stdinR, Stdout: stdoutW, Stderr: first,
		})
		_ = stdoutW.CloseWithError(err)
		_ = stdinR.Close()
		ended <- err
	}()
	conn := &relayConn{Reader: stdoutR, stdin: stdinW, cancel: cancel}
	timer := time.NewTimer(r.o.DialTimeout + relayReadyGrace)
	defer timer.Stop()
	var line string
	select {
	case line = <-first.line:
	case err := <-ended:
		// The exec may have said why as it ended.
		select {
		case line = <-first.line:
		default:
			conn.Close()
			return nil, relayExecFailed{refuse("the relay in the instance failed: %s", truncate(fmt.Sprint(err), 300))}
		}
	case <-timer.C:
		conn.Close()
		return nil, refuse("the relay in the instance did not answer within %s", r.o.DialTimeout+relayReadyGrace)
	case <-ctx.Done():
		conn.Close()
		return nil, ctx.Err()
	}
	if line != RelayReady {
		conn.Close()
		return nil, refuse("%s", truncate(strings.TrimPrefix(line, relayLinePrefix), 300))
	}
	return conn, nil
}

// relayExecFailed is a dial whose exec failed before the relay answered: the container may be
// gone (not found, not running). Any such failure counts, as the API server, kubelets and
// runtimes each word it their own way; forgetting a container that still runs costs one read of
// its pod.
type relayExecFailed struct{ error }

func (e relayExecFailed) Unwrap() error { return e.error }

// relayConn is a dial's exec: its stdout is what the far host sends, its stdin what it gets.
type relayConn struct {
	io.Reader
	stdin  *io.PipeWriter
	cancel context.CancelFunc
}

func (c *relayConn) Write(p []byte) (int, error) { return c.stdin.Write(p) }
func (c *relayConn) CloseWrite() error           { return c.stdin.Close() }

// Close ends the exec, and with it the dial in the pod.
func (c *relayConn) Close() error {
	c.cancel()
	return c.stdin.Close()
}

// firstLine is the dial's stderr: its first line is handed over once, the rest discarded.
type firstLine struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	done bool
	line chan string
}

func newFirstLine() *firstLine { return &firstLine{line: make(chan string, 1)} }

func (f *firstLine) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return len(p), nil
	}
	f.buf.Write(p)
	if i := bytes.IndexByte(f.buf.Bytes(), '\n'); i >= 0 || f.buf.Len() > maxRelayLine {
		if i < 0 {
			i = maxRelayLine
		}
		f.done = true
		f.line <- strings.TrimSpace(string(f.buf.Bytes()[:i]))
	}
	return len(p), nil
}
