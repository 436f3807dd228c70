package sshproxy_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"
	"k8s.io/apimachinery/pkg/util/httpstream"

	"github.com/opi-bridge/opi/k8s/instances"
	"github.com/opi-bridge/opi/sshproxy"
)

// upper is a pod's port that answers what it read, in upper case, once the client's side ends.
func upper(_ context.Context, _ string, _ uint16, s sshproxy.Stream) error {
	in, err := io.ReadAll(s)
	if err != nil {
		return err
	}
	_, _ = s.Write([]byte(strings.ToUpper(string(in))))
	return s.CloseWrite()
}

// roundTrip writes out through a tunnel, ends its side, and reads what comes back.
func roundTrip(conn io.ReadWriteCloser, out string) string {
	GinkgoHelper()
	defer conn.Close()
	_, err := conn.Write([]byte(out))
	Expect(err).NotTo(HaveOccurred())
	Expect(conn.(interface{ CloseWrite() error }).CloseWrite()).To(Succeed())
	in, err := io.ReadAll(conn)
	Expect(err).NotTo(HaveOccurred())
	return string(in)
}

var _ = Describe("Tunnels (direct-tcpip)", func() {
	var p *proxy

	BeforeEach(func() {
		p = startProxy(startStandIns(), nil)
		p.instances.PodStub = func(name string) (*instances.Pod, bool) {
			pod := runningPod(name)
			pod.IP = "10.1.2.3"
			return pod, true
		}
		p.forwarder.ForwardStub = upper
	})

	DescribeTable("carries bytes both ways to a port of the instance itself, through pods/portforward",
		func(host string) {
			conn, err := p.connect().Dial("tcp", host+":8080")
			Expect(err).NotTo(HaveOccurred())
			Expect(roundTrip(conn, "ping")).To(Equal("PING"))
			Expect(p.forwarder.ForwardCallCount()).To(Equal(1))
			_, pod, port, _ := p.forwarder.ForwardArgsForCall(0)
			Expect(pod).To(Equal("dora-0"))
			Expect(port).To(Equal(uint16(8080)))
		},
		Entry("localhost", "localhost"),
		Entry("127.0.0.1", "127.0.0.1"),
		Entry("the pod's own IP", "10.1.2.3"),
	)

	It("carries several tunnels of one connection apart", func() {
		client := p.connect()
		var wg sync.WaitGroup
		for _, word := range []string{"one", "two", "three"} {
			conn, err := client.Dial("tcp", "localhost:8080")
			Expect(err).NotTo(HaveOccurred())
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				Expect(roundTrip(conn, word)).To(Equal(strings.ToUpper(word)))
			}()
		}
		wg.Wait()
		Expect(p.forwarder.ForwardCallCount()).To(Equal(3))
	})

	DescribeTable("refuses another host with a clear message, and forwards nothing",
		func(addr, message string) {
			_, err := p.connect().Dial("tcp", addr)
			var open *ssh.OpenChannelError
			Expect(err).To(BeAssignableToTypeOf(open))
			Expect(err.Error()).To(ContainSubstring(message))
			Expect(p.forwarder.ForwardCallCount()).To(Equal(0))
		},
		Entry("a database elsewhere", "db.internal:5432", "tunnels reach only the instance's own ports (localhost or its IP), not db.internal:5432"),
		Entry("another pod's IP", "10.1.2.4:8080", "not 10.1.2.4:8080"),
	)

	It("refuses a tunnel once the instance is gone", func() {
		client := p.connect()
		p.instances.PodStub = nil
		p.instances.PodReturns(nil, false)
		_, err := client.Dial("tcp", "localhost:8080")
		Expect(err).To(MatchError(ContainSubstring("instance 0 is gone")))
		Expect(p.forwarder.ForwardCallCount()).To(Equal(0))
	})
})

// halfStream is one side of a port-forward stream that, as SPDY's, closes its writing half
// only.
type halfStream struct {
	io.Reader
	io.WriteCloser
	headers http.Header
}

func (s *halfStream) Reset() error         { return s.WriteCloser.Close() }
func (s *halfStream) Headers() http.Header { return s.headers }
func (s *halfStream) Identifier() uint32   { return 0 }

// podSide is what the kubelet holds of a stream: what the proxy wrote, and its own writer.
type podSide struct {
	headers http.Header
	in      io.Reader
	out     io.WriteCloser
}

// fakeConn is a port-forward connection whose streams the spec plays the kubelet's side of.
type fakeConn struct {
	created chan podSide
	closed  chan bool
}

func newFakeConn() *fakeConn {
	return &fakeConn{created: make(chan podSide, 4), closed: make(chan bool)}
}

func (c *fakeConn) CreateStream(h http.Header) (httpstream.Stream, error) {
	toPod, proxyWrites := io.Pipe()
	fromPod, podWrites := io.Pipe()
	c.created <- podSide{headers: h.Clone(), in: toPod, out: podWrites}
	return &halfStream{Reader: fromPod, WriteCloser: proxyWrites, headers: h.Clone()}, nil
}
func (c *fakeConn) Close() error                       { return nil }
func (c *fakeConn) CloseChan() <-chan bool             { return c.closed }
func (c *fakeConn) SetIdleTimeout(time.Duration)       {}
func (c *fakeConn) RemoveStreams(...httpstream.Stream) {}

// pipeStream is the client's side of a tunnel in the Forwarder's specs.
type pipeStream struct {
	io.Reader
	io.WriteCloser
}

func (s pipeStream) CloseWrite() error { return s.WriteCloser.Close() }

var _ = Describe("The pods/portforward Forwarder", func() {
	var (
		conn   *fakeConn
		dialed []string
		fwd    sshproxy.Forwarder
	)

	BeforeEach(func() {
		conn = newFakeConn()
		dialed = nil
		fwd = sshproxy.NewForwarder(func(pod string) (httpstream.Connection, error) {
			dialed = append(dialed, pod)
			return conn, nil
		})
	})

	// forward runs Forward with a client that writes out and ends; it returns the client's
	// reader and Forward's result.
	forward := func(out string) (io.Reader, chan error) {
		clientIn, proxyOut := io.Pipe()
		proxyIn, clientOut := io.Pipe()
		go func() {
			_, _ = clientOut.Write([]byte(out))
			_ = clientOut.Close()
		}()
		done := make(chan error, 1)
		go func() {
			done <- fwd.Forward(context.Background(), "dora-0", 8080, pipeStream{Reader: proxyIn, WriteCloser: proxyOut})
		}()
		return clientIn, done
	}

	It("opens an error and a data stream for the port and carries bytes both ways", func() {
		client, done := forward("ping")
		var errSide, data podSide
		Eventually(conn.created).Should(Receive(&errSide))
		Eventually(conn.created).Should(Receive(&data))
		Expect(dialed).To(Equal([]string{"dora-0"}))
		Expect(errSide.headers.Get("streamType")).To(Equal("error"))
		Expect(data.headers.Get("streamType")).To(Equal("data"))
		Expect(data.headers.Get("port")).To(Equal("8080"))
		Expect(errSide.headers.Get("port")).To(Equal("8080"))

		in, err := io.ReadAll(data.in)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(in)).To(Equal("ping"), "the client's EOF ends the data stream's writing half")
		_, _ = data.out.Write([]byte("PONG"))
		Expect(data.out.Close()).To(Succeed())
		Expect(errSide.out.Close()).To(Succeed())

		back, err := io.ReadAll(client)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(back)).To(Equal("PONG"))
		Eventually(done).Should(Receive(BeNil()))
	})

	It("returns the kubelet's reason when the port cannot be reached", func() {
		_, done := forward("")
		var errSide podSide
		Eventually(conn.created).Should(Receive(&errSide))
		_, _ = errSide.out.Write([]byte("error forwarding port 8080 to pod: connection refused"))
		Expect(errSide.out.Close()).To(Succeed())
		Eventually(done).Should(Receive(MatchError("port 8080: error forwarding port 8080 to pod: connection refused")))
	})

	It("returns the reason a kubelet writes after it ended the data stream", func() {
		_, done := forward("")
		var errSide, data podSide
		Eventually(conn.created).Should(Receive(&errSide))
		Eventually(conn.created).Should(Receive(&data))
		Expect(data.out.Close()).To(Succeed())
		_, _ = errSide.out.Write([]byte("error forwarding port 8080 to pod: no forward found"))
		Expect(errSide.out.Close()).To(Succeed())
		Eventually(done).Should(Receive(MatchError("port 8080: error forwarding port 8080 to pod: no forward found")))
	})
})
