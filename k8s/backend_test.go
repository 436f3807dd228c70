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
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("Backend", func() {
	ctx := context.Background()

	Describe("NewBackend", func() {
		DescribeTable("refuses options it cannot work with, before any call",
			func(opts k8s.Options, message string) {
				client := backendtest.NewClient()
				opts.Namespace = backendtest.Namespace
				backend, err := k8s.NewBackend(client, lagertest.NewTestLogger("k8s"), opts)
				Expect(err).To(MatchError(ContainSubstring(message)))
				Expect(backend).To(BeNil())
				Expect(client.Actions()).To(BeEmpty())
			},
			Entry("an unknown workload kind", k8s.Options{Workload: "replicasets"}, `backend "replicasets" is not one of deployments, statefulsets`),
			Entry("an unknown pod security level", k8s.Options{Pods: objects.PodOptions{PodSecurity: "privileged"}}, `pod security "privileged"`),
			Entry("a negative probe timeout", k8s.Options{Pods: objects.PodOptions{ProbeTimeout: -time.Second}}, "probe timeout must not be negative"),
			Entry("gateway routing without a gateway", k8s.Options{Hooks: hooks.Options{Routing: hooks.RoutingOptions{Mode: hooks.RoutingGateway}}}, "routing gateway needs the gateway's name"),
			Entry("an unknown routing mode", k8s.Options{Hooks: hooks.Options{Routing: hooks.RoutingOptions{Mode: "tcp"}}}, `routing "tcp"`),
		)

		It("refuses to be made without a client", func() {
			_, err := k8s.NewBackend(nil, lagertest.NewTestLogger("k8s"), k8s.Options{Namespace: backendtest.Namespace})
			Expect(err).To(MatchError("backend needs a kubernetes client"))
		})
	})

	Describe("Start", func() {
		It("lists and watches only the namespace's deployments, pods and jobs with opi's source labels", func() {
			client := backendtest.NewClient()
			backendtest.StartBackend(client)
			resources := []string{}
			for _, a := range client.Actions() {
				if a.GetVerb() != "list" && a.GetVerb() != "watch" {
					continue
				}
				resources = append(resources, a.GetVerb()+" "+a.GetResource().Resource)
				Expect(a.GetNamespace()).To(Equal(backendtest.Namespace))
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
			client := backendtest.NewClient()
			backend := backendtest.StartBackend(client)
			Expect(backend.Start(ctx)).To(MatchError(ContainSubstring("already started")))
		})

		It("gives up, unavailable, when its context ends before the caches sync", func() {
			client := backendtest.NewClient()
			client.PrependReactor("list", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, backendtest.ConnectionRefused
			})
			backend := backendtest.MustBackend(client, lagertest.NewTestLogger("k8s"), k8s.Options{Namespace: backendtest.Namespace})
			short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			Expect(backend.Start(short)).To(MatchError(opi.ErrUnavailable))
		})

		It("makes every call answer ErrUnavailable until it has synced", func() {
			backend := backendtest.MustBackend(backendtest.NewClient(), lagertest.NewTestLogger("k8s"), k8s.Options{Namespace: backendtest.Namespace})
			lrp := backendtest.SampleLRP()
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
			client := backendtest.NewClient()
			backend := backendtest.StartBackend(client)
			Expect(backend.Ready(ctx)).To(Succeed())
		})

		It("reports an unreachable API server as unavailable", func() {
			client := backendtest.NewClient()
			backend := backendtest.StartBackend(client)
			client.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, backendtest.ConnectionRefused
			})
			Expect(backend.Ready(ctx)).To(MatchError(opi.ErrUnavailable))
		})
	})
})
