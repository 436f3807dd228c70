package localkube_test

import (
	"crypto/rand"
	"fmt"
	"net"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/localkube"
	"github.com/opi-bridge/opi/testsupport/tcptarget"
)

var _ = Describe("Port-forward to simulated pods", func() {
	var ns string

	BeforeEach(func(ctx SpecContext) {
		created, err := cluster.CreateNamespace(ctx, &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "localkube-forward-"},
		})
		Expect(err).NotTo(HaveOccurred())
		ns = created.Name
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Spec: podSpec("64Mi")}
		_, err = cluster.Clientset().CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() (corev1.PodPhase, error) {
			p, err := cluster.Clientset().CoreV1().Pods(ns).Get(ctx, "db", metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return p.Status.Phase, nil
		}).WithContext(ctx).Should(Equal(corev1.PodRunning))
	})

	// portForward runs `kubectl port-forward` to the pod's port and returns the local address it
	// listens on; kubectl ends when a forwarded connection fails, so each attempt runs its own.
	portForward := func(port int) string {
		GinkgoHelper()
		cmd, addr, err := cluster.KubectlPortForward(ns, "db", port)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		return addr
	}

	roundTrip := func(port int, out []byte) ([]byte, error) {
		conn, err := net.Dial("tcp", portForward(port))
		if err != nil {
			return nil, err
		}
		defer conn.Close()
		return tcptarget.RoundTrip(conn.(*net.TCPConn), out)
	}

	It("carries kubectl port-forward's bytes both ways to the local server a PortForward names", func(ctx SpecContext) {
		payload := make([]byte, 1<<20)
		_, _ = rand.Read(payload)
		echo, err := tcptarget.Echo(int64(len(payload)))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(echo.Close)

		Expect(cluster.ForwardPorts(ctx, ns, "db", localkube.Forward{Port: 5432, Address: echo.Addr()})).To(Succeed())

		// kwok learns of the rule through its watch: the first attempts may find none.
		Eventually(func() ([]byte, error) { return roundTrip(5432, payload) }).
			WithContext(ctx).WithTimeout(30 * time.Second).Should(Equal(payload))
	})

	It("runs a PortForward's command with the connection as its input and output, the client's end its input's end", func(ctx SpecContext) {
		Expect(cluster.ForwardPorts(ctx, ns, "db", localkube.Forward{Port: 9000, Command: []string{"wc", "-c"}})).To(Succeed())

		out := make([]byte, 100_000)
		Eventually(func() (string, error) {
			in, err := roundTrip(9000, out)
			return string(in), err
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Equal(fmt.Sprintf("%d\n", len(out))))
	})

	It("refuses a rule with neither an address nor a command", func(ctx SpecContext) {
		Expect(cluster.ForwardPorts(ctx, ns, "db", localkube.Forward{Port: 80})).
			To(MatchError(ContainSubstring("neither an address nor a command")))
	})
})
