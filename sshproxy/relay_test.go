package sshproxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/instances"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
	"github.com/opi-bridge/opi/sshproxy"
)

const relayNamespace = "cf-workloads"

var podsResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// kubelet plays the API server and kubelet for ephemeral containers on a fake clientset: a patch
// of pods/ephemeralcontainers adds the containers and, unless told otherwise, reports them
// running.
type kubelet struct {
	client *fake.Clientset

	mu sync.Mutex
	// refuse is the patch's answer instead of adding; state is what the added containers
	// report (nil: no status at all).
	refuse error
	state  *corev1.ContainerState
}

func newKubelet(pods ...runtime.Object) *kubelet {
	k := &kubelet{
		client: fake.NewClientset(pods...),
		state:  &corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
	}
	k.client.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		pa := a.(clienttesting.PatchAction)
		if pa.GetSubresource() != "ephemeralcontainers" {
			return false, nil, nil
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.refuse != nil {
			return true, nil, k.refuse
		}
		var patch struct {
			Spec struct{ EphemeralContainers []corev1.EphemeralContainer }
		}
		if err := json.Unmarshal(pa.GetPatch(), &patch); err != nil {
			return true, nil, err
		}
		obj, err := k.client.Tracker().Get(podsResource, pa.GetNamespace(), pa.GetName())
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod).DeepCopy()
		for _, c := range patch.Spec.EphemeralContainers {
			pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, c)
			if k.state != nil {
				pod.Status.EphemeralContainerStatuses = append(pod.Status.EphemeralContainerStatuses,
					corev1.ContainerStatus{Name: c.Name, Image: c.Image, State: *k.state})
			}
		}
		return true, pod, k.client.Tracker().Update(podsResource, pod, pa.GetNamespace())
	})
	return k
}

// patches are the bodies of the patches of pods/ephemeralcontainers made so far.
func (k *kubelet) patches() []map[string]any {
	var out []map[string]any
	for _, a := range k.client.Actions() {
		if pa, ok := a.(clienttesting.PatchAction); ok && pa.GetSubresource() == "ephemeralcontainers" {
			var m map[string]any
			Expect(json.Unmarshal(pa.GetPatch(), &m)).To(Succeed())
			Expect(pa.GetPatchType()).To(BeEquivalentTo("application/strategic-merge-patch+json"))
			Expect(pa.GetName()).To(Equal("dora-0"))
			out = append(out, m)
		}
	}
	return out
}

// podGets counts the reads of a pod so far.
func (k *kubelet) podGets() int {
	n := 0
	for _, a := range k.client.Actions() {
		if a.GetVerb() == "get" && a.GetResource() == podsResource && a.GetSubresource() == "" {
			n++
		}
	}
	return n
}

// updatePod changes the pod as the kubelet or a controller would.
func (k *kubelet) updatePod(change func(*corev1.Pod)) {
	GinkgoHelper()
	obj, err := k.client.Tracker().Get(podsResource, relayNamespace, "dora-0")
	Expect(err).NotTo(HaveOccurred())
	pod := obj.(*corev1.Pod).DeepCopy()
	change(pod)
	Expect(k.client.Tracker().Update(podsResource, pod, relayNamespace)).To(Succeed())
}

func appPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "dora-0", Namespace: relayNamespace, UID: "uid-dora-0"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: names.ContainerName}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// farHost is a TCP server on loopback that answers what it read, in upper case, once the
// client's side ends.
func farHost() (host, port string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(l.Close)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				in, _ := io.ReadAll(conn)
				_, _ = conn.Write([]byte(strings.ToUpper(string(in))))
			}()
		}
	}()
	host, port, err = net.SplitHostPort(l.Addr().String())
	Expect(err).NotTo(HaveOccurred())
	return host, port
}

// relayExec plays the relay container: it runs `opi relay dial` on this machine with the exec's
// streams, reaching "db.internal:5432" at host:port.
func relayExec(host, port string) func(context.Context, sshproxy.ExecRequest) error {
	return func(ctx context.Context, req sshproxy.ExecRequest) error {
		if req.Container != names.RelayContainerName {
			return errors.New("not the relay container")
		}
		n := len(req.Command)
		if n < 2 || req.Command[n-2] != "db.internal" || req.Command[n-1] != "5432" {
			return errors.New("not the database")
		}
		return sshproxy.RelayDialFor(ctx, host, port, time.Second, req.Stdin, req.Stdout, req.Stderr)
	}
}

var _ = Describe("Tunnels to other hosts (the relay)", func() {
	var (
		p     *proxy
		k     *kubelet
		relay sshproxy.RelayOptions
	)

	BeforeEach(func() {
		k = newKubelet(appPod())
		relay = sshproxy.RelayOptions{Image: "registry.example.com/opi:1.2.3", Binary: "/opi"}
	})

	start := func() {
		p = startProxyWith(startStandIns(), nil, func(p *proxy) sshproxy.Relay {
			return sshproxy.NewPodRelay(k.client, relayNamespace, p.executor, relay)
		})
		p.executor.ExecStub = relayExec(farHost())
	}

	// refused dials target and returns the message of the channel's refusal.
	refused := func(target string) string {
		GinkgoHelper()
		_, err := p.connect().Dial("tcp", target)
		var open *ssh.OpenChannelError
		Expect(errors.As(err, &open)).To(BeTrue(), "not a channel refusal: %v", err)
		return open.Message
	}

	// tunnel opens a tunnel to the database through client and checks it carries a line.
	tunnel := func(client *ssh.Client, word string) {
		GinkgoHelper()
		conn, err := client.Dial("tcp", "db.internal:5432")
		Expect(err).NotTo(HaveOccurred())
		Expect(roundTrip(conn, word)).To(Equal(strings.ToUpper(word)))
	}

	It("adds one relay container of opi's image to the pod, meeting Pod Security's restricted level", func() {
		start()
		conn, err := p.connect().Dial("tcp", "db.internal:5432")
		Expect(err).NotTo(HaveOccurred())
		Expect(roundTrip(conn, "select 1")).To(Equal("SELECT 1"))

		patches := k.patches()
		Expect(patches).To(HaveLen(1))
		Expect(patches[0]).To(HaveKeyWithValue("metadata", map[string]any{"uid": "uid-dora-0"}), "a new pod of the same name is never changed")
		data, err := json.Marshal(patches[0]["spec"])
		Expect(err).NotTo(HaveOccurred())
		var spec corev1.PodSpec
		Expect(json.Unmarshal(data, &spec)).To(Succeed())
		Expect(spec.EphemeralContainers).To(Equal([]corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name:                     "opi-relay",
			Image:                    "registry.example.com/opi:1.2.3",
			Command:                  []string{"/opi", "relay", "idle"},
			ImagePullPolicy:          corev1.PullIfNotPresent,
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			SecurityContext: &corev1.SecurityContext{
				RunAsNonRoot:             ptr.To(true),
				RunAsUser:                ptr.To[int64](65532),
				RunAsGroup:               ptr.To[int64](65532),
				AllowPrivilegeEscalation: ptr.To(false),
				ReadOnlyRootFilesystem:   ptr.To(true),
				Privileged:               ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
		}}}))
		Expect(spec.Containers).To(BeEmpty(), "the patch touches nothing but the ephemeral containers")
	})

	It("runs each tunnel's dial as an exec into the relay container, reusing the container", func() {
		start()
		client := p.connect()
		for _, word := range []string{"one", "two"} {
			tunnel(client, word)
		}
		Expect(k.patches()).To(HaveLen(1))
		Expect(p.executor.ExecCallCount()).To(Equal(2))
		for i := range 2 {
			_, req := p.executor.ExecArgsForCall(i)
			Expect(req.Pod).To(Equal("dora-0"))
			Expect(req.Container).To(Equal("opi-relay"))
			Expect(req.Command).To(Equal([]string{"/opi", "relay", "dial", "--timeout", "10s", "--", "db.internal", "5432"}))
			Expect(req.TTY).To(BeFalse())
		}
		Expect(p.forwarder.ForwardCallCount()).To(BeZero(), "the proxy never forwards another host")
	})

	It("reads the pod only until its relay container runs: a second tunnel dials at once", func() {
		start()
		client := p.connect()
		tunnel(client, "one")
		gets := k.podGets()
		Expect(gets).To(BeNumerically(">", 0))
		tunnel(client, "two")
		tunnel(p.connect(), "three")
		Expect(k.podGets()).To(Equal(gets), "no read of the pod once its relay was seen running")
		Expect(p.executor.ExecCallCount()).To(Equal(3))
		Expect(k.patches()).To(HaveLen(1))
	})

	It("readies a relay in the pod that replaced the instance's (a new uid)", func() {
		start()
		tunnel(p.connect(), "one")
		gets := k.podGets()

		Expect(k.client.Tracker().Delete(podsResource, relayNamespace, "dora-0")).To(Succeed())
		replaced := appPod()
		replaced.UID = "uid-new"
		Expect(k.client.Tracker().Add(replaced)).To(Succeed())
		granted := runningPod("dora-0")
		granted.UID = "uid-new"
		p.instances.InstanceStub = func(opi.LRPIdentifier, int32) (*instances.Pod, *instances.Workload, bool) {
			return granted, &instances.Workload{}, true
		}
		p.instances.PodStub = func(string) (*instances.Pod, bool) { return granted, true }

		tunnel(p.connect(), "two")
		Expect(k.podGets()).To(BeNumerically(">", gets))
		patches := k.patches()
		Expect(patches).To(HaveLen(2))
		Expect(patches[1]).To(HaveKeyWithValue("metadata", map[string]any{"uid": "uid-new"}))
	})

	It("forgets a relay container seen running once an exec finds it gone, and says why", func() {
		start()
		tunnel(p.connect(), "one")
		k.updatePod(func(pod *corev1.Pod) {
			pod.Status.EphemeralContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137}}
		})
		p.executor.ExecStub = func(context.Context, sshproxy.ExecRequest) error {
			return errors.New(`container not found ("opi-relay")`)
		}
		gets := k.podGets()
		Expect(refused("db.internal:5432")).To(ContainSubstring("the relay container in the instance has ended (OOMKilled)"))
		Expect(k.podGets()).To(BeNumerically(">", gets), "the pod is read again")
		gets = k.podGets()
		Expect(refused("db.internal:5432")).To(ContainSubstring("the relay container in the instance has ended (OOMKilled)"))
		Expect(k.podGets()).To(BeNumerically(">", gets), "and not remembered since")
	})

	It("adds one relay container however many tunnels open at once", func() {
		start()
		client := p.connect()
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				tunnel(client, "tunnel "+strconv.Itoa(i))
			}()
		}
		wg.Wait()
		Expect(k.patches()).To(HaveLen(1))
		Expect(p.executor.ExecCallCount()).To(Equal(8))
	})

	It("refuses the channel with the pod's reason when the far host cannot be reached", func() {
		start()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		host, port, err := net.SplitHostPort(l.Addr().String())
		Expect(err).NotTo(HaveOccurred())
		Expect(l.Close()).To(Succeed())
		p.executor.ExecStub = relayExec(host, port)
		Expect(refused("db.internal:5432")).To(Equal("opi ssh-proxy: cannot reach db.internal:5432 from instance 0: connect: connection refused"))
	})

	DescribeTable("refuses a host or port it would not dial, before any Kubernetes call",
		func(target, message string) {
			start()
			Expect(refused(target)).To(ContainSubstring(message))
			Expect(k.client.Actions()).To(BeEmpty())
			Expect(p.executor.ExecCallCount()).To(BeZero())
		},
		Entry("a host that is no name", "db internal:5432", `cannot tunnel to db internal:5432: "db internal" is neither an IP address nor a host name`),
		Entry("a flag for a host", "-oProxyCommand:22", "is neither an IP address nor a host name"),
		Entry("port 0", "db.internal:0", "port 0 is not between 1 and 65535"),
	)

	DescribeTable("refuses the channel with a clear message when the relay container cannot be added, and never dials",
		func(refusal error, message string) {
			k.refuse = refusal
			start()
			Expect(refused("db.internal:5432")).To(ContainSubstring(
				"opi ssh-proxy: cannot reach db.internal:5432 from instance 0: tunnels to other hosts need a relay container in the instance, which could not be added: " + message))
			Expect(p.executor.ExecCallCount()).To(BeZero())
		},
		Entry("Pod Security refuses it", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "dora-0",
			errors.New(`violates PodSecurity "restricted:latest"`)), `pods "dora-0" is forbidden: violates PodSecurity "restricted:latest"`),
		Entry("the cluster has no ephemeral containers", apierrors.NewNotFound(schema.GroupResource{Resource: "pods/ephemeralcontainers"}, "dora-0"),
			"the cluster does not serve ephemeral containers"),
	)

	It("refuses the channel when the relay container does not start in time, with the kubelet's reason", func() {
		k.state = &corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}
		relay.StartTimeout = time.Second
		start()
		Expect(refused("db.internal:5432")).To(ContainSubstring(
			"cannot reach db.internal:5432 from instance 0: the relay container in the instance did not start within 1s (ImagePullBackOff: Back-off pulling image)"))
		Expect(p.executor.ExecCallCount()).To(BeZero())
	})

	It("refuses the channel when the relay container has ended", func() {
		k.state = &corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}
		start()
		Expect(refused("db.internal:5432")).To(ContainSubstring("the relay container in the instance has ended (Error)"))
		Expect(p.executor.ExecCallCount()).To(BeZero())
	})

	It("refuses the channel when the pod was replaced by a namesake, and changes nothing", func() {
		replaced := appPod()
		replaced.UID = "uid-new"
		k = newKubelet(replaced)
		start()
		Expect(refused("db.internal:5432")).To(ContainSubstring("the instance is gone"))
		Expect(k.patches()).To(BeEmpty())
		Expect(p.executor.ExecCallCount()).To(BeZero())
	})

	It("refuses every other host with a clear message when tunnels to other hosts are turned off", func() {
		p = startProxy(startStandIns(), nil)
		Expect(refused("db.internal:5432")).To(ContainSubstring(
			"tunnels reach only the instance's own ports (localhost or its IP), not db.internal:5432: tunnels to other hosts are turned off"))
		Expect(p.executor.ExecCallCount()).To(BeZero())
		Expect(p.forwarder.ForwardCallCount()).To(BeZero())
	})
})

var _ = DescribeTable("A relay's target",
	func(host string, port int, message string) {
		err := sshproxy.CheckRelayTarget(host, port)
		if message == "" {
			Expect(err).NotTo(HaveOccurred())
		} else {
			Expect(err).To(MatchError(message))
		}
	},
	Entry("a host name", "db.internal", 5432, ""),
	Entry("a fully qualified one", "db.service.cf.internal.", 5432, ""),
	Entry("an IPv4 address", "10.0.0.5", 1, ""),
	Entry("an IPv6 address", "fd00::5", 65535, ""),
	Entry("a URL", "http://db", 80, `"http://db" is neither an IP address nor a host name`),
	Entry("an empty host", "", 80, `"" is neither an IP address nor a host name`),
	Entry("a label too long", strings.Repeat("a", 64)+".internal", 80, `"`+strings.Repeat("a", 64)+`.internal" is neither an IP address nor a host name`),
	Entry("port 65536", "db.internal", 65536, "port 65536 is not between 1 and 65535"),
)
