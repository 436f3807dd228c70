package main

import (
	"github.com/nats-io/nats.go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
)

var _ = Describe("the local NATS server (run --routing nats)", func() {
	It("prints every message on router.* with the nats: prefix, and hands opi its URL", func() {
		out := gbytes.NewBuffer()
		l, err := startNATS(out)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(l.close)
		Expect(out).To(gbytes.Say(`nats server at nats://127\.0\.0\.1:\d+\n`))
		Expect(l.OpiArgs()).To(Equal([]string{"--routing", "nats", "--nats-url", l.URL()}))

		// What opi sends, from a connection of its own.
		conn, err := nats.Connect(l.URL())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(conn.Close)
		// One connection's messages arrive in order: other.subject, were it printed, would come first.
		Expect(conn.Publish("other.subject", []byte(`{}`))).To(Succeed())
		Expect(conn.Publish("router.register", []byte(`{"host":"10.0.0.1","port":8080}`))).To(Succeed())
		Expect(conn.Publish("router.unregister", []byte(`{"host":"10.0.0.1","port":8080}`))).To(Succeed())
		Expect(conn.Flush()).To(Succeed())
		Eventually(out).Should(gbytes.Say(`nats: router.register \{"host":"10.0.0.1","port":8080\}\n`))
		Eventually(out).Should(gbytes.Say(`nats: router.unregister \{"host":"10.0.0.1","port":8080\}\n`))
		Expect(string(out.Contents())).NotTo(ContainSubstring("other.subject"))
	})
})
