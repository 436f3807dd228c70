package integration_test

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"net"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	"golang.org/x/crypto/ssh"

	"github.com/opi-bridge/opi/localkube"
	"github.com/opi-bridge/opi/testsupport/tcptarget"
)

// The instance's ports the tunnel specs reach: kwok forwards the first to an echo server on this
// machine, the second to `wc -c` (which answers only once its input ends), and nothing forwards
// the third.
const (
	echoPort        = 8080
	countPort       = 9000
	unforwardedPort = 7070
)

// digest sums a tunnel's bytes, so a failure prints a line rather than megabytes.
type digest struct {
	Len int
	Sum string
}

func digestOf(b []byte) digest { return digest{Len: len(b), Sum: fmt.Sprintf("%x", sha256.Sum256(b))} }

var _ = Describe("cf ssh -L through opi ssh-proxy", Ordered, func() {
	var (
		proxy   *sshProxy
		podIP   string
		payload []byte
	)

	BeforeAll(func(ctx SpecContext) {
		ns := newNamespace()
		_, a := runningApp(ns)
		proxy = startSSHProxy(ns, a)

		payload = make([]byte, 4<<20)
		_, _ = rand.Read(payload)
		echo, err := tcptarget.Echo(int64(len(payload)))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(echo.Close)
		pod := livePod(ns, a)
		podIP = pod.Status.PodIP
		Expect(podIP).NotTo(BeEmpty())
		Expect(cluster.ForwardPorts(ctx, ns, pod.Name,
			localkube.Forward{Port: echoPort, Address: echo.Addr()},
			localkube.Forward{Port: countPort, Command: []string{"wc", "-c"}},
		)).To(Succeed())

		// kwok learns of the rule through its watch; once a tunnel reaches the counter, it has.
		client, err := proxy.dial(sshCode, nil)
		Expect(err).NotTo(HaveOccurred())
		defer client.Close()
		Eventually(func() (string, error) {
			conn, err := client.Dial("tcp", "localhost:"+strconv.Itoa(countPort))
			if err != nil {
				return "", err
			}
			defer conn.Close()
			in, err := tcptarget.RoundTrip(conn.(tcptarget.HalfCloser), []byte("x"))
			return string(in), err
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Equal("1\n"))
	}, NodeTimeout(3*time.Minute))

	Context("with a client written as the cf CLI connects (direct-tcpip channels)", func() {
		var client *ssh.Client

		BeforeAll(func() {
			var err error
			client, err = proxy.dial(sshCode, nil)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(client.Close)
		})

		roundTrip := func(host string, port int, out []byte) ([]byte, error) {
			conn, err := client.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
			if err != nil {
				return nil, err
			}
			defer conn.Close()
			return tcptarget.RoundTrip(conn.(tcptarget.HalfCloser), out)
		}

		DescribeTable("carries bytes both ways to the instance's port, the client's half-close leaving the way back open",
			func(host func() string) {
				in, err := roundTrip(host(), echoPort, payload)
				Expect(err).NotTo(HaveOccurred())
				Expect(digestOf(in)).To(Equal(digestOf(payload)))
			},
			Entry("as localhost", func() string { return "localhost" }),
			Entry("as the instance's IP", func() string { return podIP }),
		)

		It("passes the client's end on to the instance's port", func() {
			in, err := roundTrip("localhost", countPort, payload)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(in)).To(Equal(fmt.Sprintf("%d\n", len(payload))))
		})

		It("ends a tunnel to a port nothing forwards at once, with the reason in the proxy's log", func() {
			in, err := roundTrip("localhost", unforwardedPort, []byte("hello"))
			Expect(err).NotTo(HaveOccurred())
			Expect(in).To(BeEmpty())
			Eventually(proxy.session.Out).Should(gbytes.Say(
				`tunnel-failed.*port ` + strconv.Itoa(unforwardedPort) + `.*forward not found for port ` + strconv.Itoa(unforwardedPort)))
		})

		// This proxy runs outside a pod with no relay image: it has no relay for other hosts
		// (ssh_relay_test.go has one), and never dials them itself.
		It("refuses a tunnel to a host other than the instance when the proxy has no relay, before any Kubernetes call", func() {
			Expect(proxy.session.Out.Contents()).To(ContainSubstring("other-host-tunnels-off"))
			_, err := client.Dial("tcp", "db.internal:5432")
			Expect(err).To(MatchError(And(
				ContainSubstring("administratively prohibited"),
				ContainSubstring("tunnels reach only the instance's own ports (localhost or its IP), not db.internal:5432: tunnels to other hosts are turned off"),
			)))
		})
	})

	Context("with OpenSSH's client (ssh -N -L)", func() {
		var local map[string]string // what each -L forwards, by its local address

		BeforeAll(func() {
			openssh := proxy.openSSH()
			local = map[string]string{}
			args := []string{"-N", "-o", "ExitOnForwardFailure=yes"}
			for _, target := range []string{
				"localhost:" + strconv.Itoa(echoPort),
				net.JoinHostPort(podIP, strconv.Itoa(echoPort)),
				"localhost:" + strconv.Itoa(countPort),
			} {
				addr := freeAddr()
				local[target] = addr
				args = append(args, "-L", addr+":"+target)
			}
			session, err := gexec.Start(openssh.Command(args...), GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { session.Kill().Wait(10 * time.Second) })
			for _, addr := range local {
				Eventually(func() error {
					c, err := net.Dial("tcp", addr)
					if err == nil {
						c.Close()
					}
					return err
				}).Should(Succeed(), "ssh -N listens on %s", addr)
			}
		})

		roundTrip := func(target string, out []byte) ([]byte, error) {
			conn, err := net.Dial("tcp", local[target])
			if err != nil {
				return nil, err
			}
			defer conn.Close()
			return tcptarget.RoundTrip(conn.(*net.TCPConn), out)
		}

		DescribeTable("carries bytes both ways to the instance's port, the client's half-close leaving the way back open",
			func(target func() string) {
				in, err := roundTrip(target(), payload)
				Expect(err).NotTo(HaveOccurred())
				Expect(digestOf(in)).To(Equal(digestOf(payload)))
			},
			Entry("as localhost", func() string { return "localhost:" + strconv.Itoa(echoPort) }),
			Entry("as the instance's IP", func() string { return net.JoinHostPort(podIP, strconv.Itoa(echoPort)) }),
		)

		It("passes the client's end on to the instance's port", func() {
			in, err := roundTrip("localhost:"+strconv.Itoa(countPort), payload)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(in)).To(Equal(fmt.Sprintf("%d\n", len(payload))))
		})
	})
})
