package tcpproxy_test

import (
	"bufio"
	"io"
	"net"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/testsupport/tcpproxy"
)

// echoServer answers every line with the line, and counts the connections it accepted.
func echoServer() (addr string, accepted *atomic.Int32) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(l.Close)
	accepted = &atomic.Int32{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String(), accepted
}

var _ = Describe("Proxy", func() {
	var (
		proxy    *tcpproxy.Proxy
		accepted *atomic.Int32
	)

	BeforeEach(func() {
		var target string
		target, accepted = echoServer()
		var err error
		proxy, err = tcpproxy.Start(target)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(proxy.Close)
	})

	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", proxy.Addr())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(c.Close)
		return c, bufio.NewReader(c)
	}
	roundTrip := func(c net.Conn, r *bufio.Reader, line string) (string, error) {
		if _, err := io.WriteString(c, line+"\n"); err != nil {
			return "", err
		}
		return r.ReadString('\n')
	}

	It("forwards bytes both ways, untouched", func() {
		c, r := dial()
		Expect(roundTrip(c, r, "hello \x00\xff")).To(Equal("hello \x00\xff\n"))
		Expect(proxy.Addr()).To(HavePrefix("127.0.0.1:"))
	})

	It("cuts every established connection and keeps listening, so that clients reconnect", func() {
		c1, r1 := dial()
		c2, r2 := dial()
		Expect(roundTrip(c1, r1, "one")).To(Equal("one\n"))
		Expect(roundTrip(c2, r2, "two")).To(Equal("two\n"))

		Expect(proxy.CutAll()).To(Equal(2))
		_, err := r1.ReadString('\n')
		Expect(err).To(HaveOccurred(), "the first connection ends")
		_, err = r2.ReadString('\n')
		Expect(err).To(HaveOccurred(), "the second connection ends")

		c3, r3 := dial()
		Expect(roundTrip(c3, r3, "again")).To(Equal("again\n"))
		Expect(accepted.Load()).To(BeEquivalentTo(3), "each client connection reached the target anew")
	})

	It("stops listening once closed", func() {
		c, r := dial()
		Expect(roundTrip(c, r, "one")).To(Equal("one\n"))
		Expect(proxy.Close()).To(Succeed())
		_, err := r.ReadString('\n')
		Expect(err).To(HaveOccurred())
		_, err = net.Dial("tcp", proxy.Addr())
		Expect(err).To(HaveOccurred())
	})
})
