package main

import (
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/handler"
)

var _ = Describe("The HTTP servers", func() {
	It("bound slow clients, and give an answer the write timeout plus some to be written", func() {
		s := newServer(http.NotFoundHandler(), 50*time.Second)
		Expect(s.ReadHeaderTimeout).To(BeNumerically(">", 0))
		Expect(s.ReadTimeout).To(BeNumerically(">=", s.ReadHeaderTimeout))
		Expect(s.IdleTimeout).To(BeNumerically(">", 0))
		// A write may use all of its 50 s and must still be able to answer 503.
		Expect(s.WriteTimeout).To(BeNumerically(">", 50*time.Second))
		Expect(s.WriteTimeout).To(Equal(50*time.Second + writeSlack))
	})
})

var _ = Describe("The operations server", func() {
	It("has a write timeout, which covers pprof's longest profile", func() {
		s := newOpsServer(http.NotFoundHandler())
		Expect(s.ReadHeaderTimeout).To(BeNumerically(">", 0))
		Expect(s.ReadTimeout).To(BeNumerically(">", 0))
		Expect(s.IdleTimeout).To(BeNumerically(">", 0))
		Expect(s.WriteTimeout).To(BeNumerically(">", 0))
		Expect(s.WriteTimeout).To(BeNumerically(">", handler.MaxPprofSeconds*time.Second))
		Expect(s.WriteTimeout).To(BeNumerically("<=", handler.MaxPprofSeconds*time.Second+writeSlack))
	})
})
