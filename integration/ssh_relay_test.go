package integration_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/names"
)

// farHost is the "other host" of the relay specs: this machine's second loopback address, which
// is not the instance's (its pod IP, localhost, 127.0.0.1 or ::1). It answers each line with the
// line in upper case: kwok never closes an exec's stdin, so the specs need no end of input.
const farHost = "127.0.0.2"

// startUpperServer listens on farHost until the container ends, closing its connections then.
func startUpperServer() string {
	GinkgoHelper()
	l, err := net.Listen("tcp", farHost+":0")
	Expect(err).NotTo(HaveOccurred())
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	DeferCleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			go func() {
				r := bufio.NewReader(conn)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(conn, strings.ToUpper(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

// lineRoundTrip writes a line through conn and reads the answer's line.
func lineRoundTrip(conn net.Conn, line string) string {
	GinkgoHelper()
	// A TCP connection's reads are bounded; an SSH channel has no deadlines (the suite's
	// timeout bounds it).
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	_, err := io.WriteString(conn, line+"\n")
	Expect(err).NotTo(HaveOccurred())
	in, err := bufio.NewReader(conn).ReadString('\n')
	Expect(err).NotTo(HaveOccurred())
	return strings.TrimSuffix(in, "\n")
}

var _ = Describe("cf ssh -L to other hosts through opi ssh-proxy's relay", Ordered, func() {
	var (
		proxy *sshProxy
		ns    string
		a     *app
		far   string
	)

	BeforeAll(func() {
		ns = newNamespace()
		// The relay container must meet the strictest level the API server enforces.
		_, a = runningApp(ns, "--pod-security", "restricted")

		// kwok runs the relay's exec on this machine as an unprivileged user, who can read the
		// exec folder but not the build's.
		bin, err := os.ReadFile(opiBin)
		Expect(err).NotTo(HaveOccurred())
		relayBin := filepath.Join(cluster.ExecDir(), "opi-relay")
		Expect(os.WriteFile(relayBin, bin, 0o755)).To(Succeed())
		DeferCleanup(os.Remove, relayBin)

		proxy = startSSHProxy(ns, a, "--relay-image", "opi:integration", "--relay-binary", relayBin)
		far = startUpperServer()
	})

	It("carries bytes both ways to another host for a CLI-shaped client, dialled from the instance's pod", func() {
		client, err := proxy.dial(sshCode, nil)
		Expect(err).NotTo(HaveOccurred())
		defer client.Close()
		conn, err := client.Dial("tcp", far)
		Expect(err).NotTo(HaveOccurred())
		defer conn.Close()
		Expect(lineRoundTrip(conn, "select 1")).To(Equal("SELECT 1"))
		Expect(lineRoundTrip(conn, "select 2")).To(Equal("SELECT 2"))
	})

	It("carries bytes both ways to another host for OpenSSH (ssh -N -L)", func() {
		local := freeAddr()
		session, err := gexec.Start(proxy.openSSH().Command("-N", "-o", "ExitOnForwardFailure=yes", "-L", local+":"+far), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		defer func() { session.Kill().Wait(10 * time.Second) }()
		var conn net.Conn
		Eventually(func() (err error) {
			conn, err = net.Dial("tcp", local)
			return err
		}).Should(Succeed(), "ssh -N listens on %s", local)
		defer conn.Close()
		Expect(lineRoundTrip(conn, "ping")).To(Equal("PING"))
	})

	It("refuses a tunnel to a host that does not answer, with the reason the pod met", func() {
		l, err := net.Listen("tcp", farHost+":0")
		Expect(err).NotTo(HaveOccurred())
		closed := l.Addr().String()
		Expect(l.Close()).To(Succeed())
		client, err := proxy.dial(sshCode, nil)
		Expect(err).NotTo(HaveOccurred())
		defer client.Close()
		_, err = client.Dial("tcp", closed)
		Expect(err).To(MatchError(And(
			ContainSubstring("connect failed"),
			ContainSubstring("opi ssh-proxy: cannot reach "+closed+" from instance 0: connect: connection refused"),
		)))
	})

	It("added exactly one relay container to the pod across the tunnels, which the API server admitted as restricted", func() {
		pod, err := kube.CoreV1().Pods(ns).Get(context.Background(), livePod(ns, a).Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(pod.Spec.EphemeralContainers).To(HaveLen(1))
		c := pod.Spec.EphemeralContainers[0]
		Expect(c.Name).To(Equal(names.RelayContainerName))
		Expect(c.Image).To(Equal("opi:integration"))
		Expect(c.Command).To(Equal([]string{filepath.Join(cluster.ExecDir(), "opi-relay"), "relay", "idle"}))
		Expect(pod.Status.EphemeralContainerStatuses).To(ConsistOf(And(
			HaveField("Name", names.RelayContainerName),
			HaveField("State.Running", Not(BeNil())),
		)))
		Expect(pod.Spec.Containers).To(ConsistOf(HaveField("Name", names.ContainerName)), "the app's own containers are untouched")
		Expect(pod.Status.Conditions).To(ContainElement(And(HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))))
	})
})
