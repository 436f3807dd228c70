package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("opi relay", func() {
	It("dials a host and carries stdin and stdout, saying on stderr that it connected", func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(l.Close)
		go func() {
			defer GinkgoRecover()
			conn, err := l.Accept()
			Expect(err).NotTo(HaveOccurred())
			defer conn.Close()
			in, err := io.ReadAll(conn)
			Expect(err).NotTo(HaveOccurred())
			_, _ = conn.Write([]byte(strings.ToUpper(string(in))))
		}()
		host, port, err := net.SplitHostPort(l.Addr().String())
		Expect(err).NotTo(HaveOccurred())
		var stdout, stderr bytes.Buffer
		code := runRelay(context.Background(), []string{"dial", "--timeout", "2s", "--", host, port}, strings.NewReader("ping"), &stdout, &stderr)
		Expect(code).To(Equal(0), stderr.String())
		Expect(stdout.String()).To(Equal("PING"))
		Expect(stderr.String()).To(Equal("opi-relay: connected\n"))
	})

	It("exits 1 with the reason on stderr when the host does not answer", func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
		Expect(l.Close()).To(Succeed())
		var stdout, stderr bytes.Buffer
		Expect(runRelay(context.Background(), []string{"dial", "--", "127.0.0.1", port}, strings.NewReader(""), &stdout, &stderr)).To(Equal(1))
		Expect(stderr.String()).To(Equal("opi-relay: connect: connection refused\n"))
		Expect(stdout.String()).To(BeEmpty())
	})

	DescribeTable("refuses what it was not made for, with its usage",
		func(args ...string) {
			var stderr bytes.Buffer
			Expect(runRelay(context.Background(), args, strings.NewReader(""), io.Discard, &stderr)).To(Equal(2))
			Expect(stderr.String()).To(ContainSubstring("usage: opi relay idle"))
		},
		Entry("no mode"),
		Entry("an unknown mode", "listen"),
		Entry("a dial without a port", "dial", "--", "db.internal"),
		Entry("idle with arguments", "idle", "now"),
		Entry("an unbounded dial", "dial", "--timeout", "1h", "--", "db.internal", "5432"),
	)

	It("idles until it is stopped", func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan int, 1)
		go func() { done <- runRelay(ctx, []string{"idle"}, strings.NewReader(""), io.Discard, io.Discard) }()
		Consistently(done, "100ms").ShouldNot(Receive())
		cancel()
		Eventually(done).Should(Receive(Equal(0)))
	})
})
