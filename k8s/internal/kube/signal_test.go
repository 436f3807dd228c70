package kube_test

import (
	"context"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/k8s/internal/kube"
)

var _ = Describe("Signal", func() {
	var s kube.Signal

	BeforeEach(func() { s = kube.Signal{} })

	It("returns at once when the condition already holds", func() {
		Expect(s.WaitFor(context.Background(), time.Hour, func() bool { return true })).To(BeTrue())
	})

	It("wakes a waiter when a change is fired, and sees the condition then", func() {
		var value atomic.Bool
		done := make(chan bool)
		go func() { done <- s.WaitFor(context.Background(), time.Hour, value.Load) }()
		Consistently(done).ShouldNot(Receive(), "nothing fired yet")
		value.Store(true)
		s.Fire()
		Eventually(done).Should(Receive(BeTrue()))
	})

	It("keeps waiting after a change that does not make the condition true", func() {
		var checks atomic.Int32
		done := make(chan bool)
		go func() { done <- s.WaitFor(context.Background(), time.Hour, func() bool { return checks.Add(1) > 2 }) }()
		Eventually(checks.Load).Should(BeNumerically(">=", 1))
		s.Fire()
		Eventually(checks.Load).Should(BeNumerically(">=", 2))
		Consistently(done).ShouldNot(Receive())
		s.Fire()
		Eventually(done).Should(Receive(BeTrue()))
	})

	It("gives up at the timeout or when the context ends, reporting the condition then", func() {
		Expect(s.WaitFor(context.Background(), time.Millisecond, func() bool { return false })).To(BeFalse())
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		Expect(s.WaitFor(ctx, time.Hour, func() bool { return false })).To(BeFalse())
	})
})
