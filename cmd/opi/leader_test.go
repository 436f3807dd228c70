package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

var _ = Describe("Leader election", func() {
	It("gives the Lease up only after the old leader's work has returned", func() {
		client := fake.NewClientset()
		var workReturned, returnedAtRelease atomic.Bool
		released := make(chan struct{}) // closed at the first release
		var once sync.Once
		client.PrependReactor("update", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
			lease := action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
			if h := lease.Spec.HolderIdentity; h == nil || *h == "" {
				once.Do(func() {
					returnedAtRelease.Store(workReturned.Load())
					close(released)
				})
			}
			return false, nil, nil
		})

		ctx, cancel := context.WithCancel(context.Background())
		leading := make(chan struct{})
		work := func(ctx context.Context) {
			close(leading)
			<-ctx.Done()
			// Slow to stop, as a reporter finishing a delivery is: it returns once the Lease
			// was released (what must not happen first), or after a while.
			select {
			case <-time.After(time.Second):
			case <-released:
			}
			workReturned.Store(true)
		}
		cfg := DefaultConfig().LeaderElection
		done := make(chan error, 1)
		go func() { done <- runAsLeader(ctx, cfg, client, "cf-workloads", lagertest.NewTestLogger("leader"), work) }()

		Eventually(leading).Should(BeClosed())
		cancel()
		Eventually(done, 10*time.Second).Should(Receive(BeNil()))
		Expect(workReturned.Load()).To(BeTrue(), "runAsLeader returned before work")
		Expect(released).To(BeClosed(), "the Lease was not released")
		Expect(returnedAtRelease.Load()).To(BeTrue(), "the Lease was released while work still ran")

		lease, err := client.CoordinationV1().Leases("cf-workloads").Get(context.Background(), cfg.LeaseName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(lease.Spec.HolderIdentity).To(Or(BeNil(), HaveValue(BeEmpty())))
	})
})
