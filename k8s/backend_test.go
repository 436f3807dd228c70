package k8s_test

import (
	"context"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("Backend", func() {
	ctx := context.Background()

	Describe("Start", func() {
		It("lists and watches only the namespace's deployments, pods and jobs with opi's source labels", func() {
			client := newClient()
			startBackend(client)
			resources := []string{}
			for _, a := range client.Actions() {
				if a.GetVerb() != "list" && a.GetVerb() != "watch" {
					continue
				}
				resources = append(resources, a.GetVerb()+" "+a.GetResource().Resource)
				Expect(a.GetNamespace()).To(Equal(namespace))
				want := "opi-bridge.io/source-type=APP"
				if a.GetResource().Resource == "jobs" {
					want = "opi-bridge.io/source-type=TASK"
				}
				switch act := a.(type) {
				case k8stesting.ListAction:
					Expect(act.GetListRestrictions().Labels.String()).To(Equal(want))
				case k8stesting.WatchAction:
					Expect(act.GetWatchRestrictions().Labels.String()).To(Equal(want))
				}
			}
			Expect(resources).To(ConsistOf("list deployments", "watch deployments", "list pods", "watch pods", "list jobs", "watch jobs"))
		})

		It("refuses a second start", func() {
			client := newClient()
			backend := startBackend(client)
			Expect(backend.Start(ctx)).To(MatchError(ContainSubstring("already started")))
		})

		It("gives up, unavailable, when its context ends before the caches sync", func() {
			client := newClient()
			client.PrependReactor("list", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, connectionRefused
			})
			backend := k8s.NewBackend(client, lagertest.NewTestLogger("k8s"), k8s.Options{Namespace: namespace})
			short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			Expect(backend.Start(short)).To(MatchError(opi.ErrUnavailable))
		})

		It("makes every call answer ErrUnavailable until it has synced", func() {
			backend := k8s.NewBackend(newClient(), lagertest.NewTestLogger("k8s"), k8s.Options{Namespace: namespace})
			lrp := sampleLRP()
			_, err := backend.ListLRPs(ctx)
			Expect(err).To(MatchError(opi.ErrUnavailable))
			_, err = backend.GetLRP(ctx, lrp.LRPIdentifier)
			Expect(err).To(MatchError(opi.ErrUnavailable))
			_, err = backend.GetInstances(ctx, lrp.LRPIdentifier)
			Expect(err).To(MatchError(opi.ErrUnavailable))
			Expect(backend.DesireLRP(ctx, lrp)).To(MatchError(opi.ErrUnavailable))
			Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{})).To(MatchError(opi.ErrUnavailable))
			Expect(backend.StopLRP(ctx, lrp.LRPIdentifier)).To(MatchError(opi.ErrUnavailable))
			Expect(backend.StopInstance(ctx, lrp.LRPIdentifier, 0)).To(MatchError(opi.ErrUnavailable))
			Expect(backend.Ready(ctx)).To(MatchError(opi.ErrUnavailable))
		})
	})

	Describe("Ready", func() {
		It("is nil once synced and the API server answers", func() {
			client := newClient()
			backend := startBackend(client)
			Expect(backend.Ready(ctx)).To(Succeed())
		})

		It("reports an unreachable API server as unavailable", func() {
			client := newClient()
			backend := startBackend(client)
			client.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, connectionRefused
			})
			Expect(backend.Ready(ctx)).To(MatchError(opi.ErrUnavailable))
		})
	})
})
