package tcptarget_test

import (
	"bytes"
	"io"
	"net"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/testsupport/tcptarget"
)

func dial(s *tcptarget.Server) *net.TCPConn {
	GinkgoHelper()
	c, err := net.Dial("tcp", s.Addr())
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(c.Close)
	return c.(*net.TCPConn)
}

var _ = Describe("tcptarget", func() {
	It("echoes what it reads and ends the reply when the client's side ends", func() {
		echo, err := tcptarget.Echo(0)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(echo.Close)
		out := bytes.Repeat([]byte("ping"), 100_000)
		Expect(tcptarget.RoundTrip(dial(echo), out)).To(Equal(out))
	})

	It("ends a connection after its limit, though the client's side goes on", func() {
		echo, err := tcptarget.Echo(4)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(echo.Close)
		c := dial(echo)
		_, err = c.Write([]byte("ping"))
		Expect(err).NotTo(HaveOccurred())
		Expect(io.ReadAll(c)).To(Equal([]byte("ping")))
	})

	It("sends a source's bytes, then its end", func() {
		src, err := tcptarget.Source(1 << 20)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(src.Close)
		in, err := io.ReadAll(dial(src))
		Expect(err).NotTo(HaveOccurred())
		Expect(in).To(HaveLen(1 << 20))
		Expect(in).To(Equal(make([]byte, 1<<20)))
		Expect(src.Port()).To(BeNumerically(">", 0))
	})

	It("closes the connections it carries on Close", func() {
		echo, err := tcptarget.Echo(0)
		Expect(err).NotTo(HaveOccurred())
		c := dial(echo)
		Expect(echo.Close()).To(Succeed())
		_, err = io.ReadAll(c)
		Expect(err).NotTo(HaveOccurred(), "the server's end, read as EOF")
		Expect(echo.Close()).To(Succeed(), "a second Close is harmless")
	})
})
