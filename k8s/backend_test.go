package k8s_test

import (
	"context"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/spec"
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

	Describe("EnsureNamespace", func() {
		var logger *lagertest.TestLogger
		BeforeEach(func() { logger = lagertest.NewTestLogger("ns") })
		opts := func(create bool) k8s.NamespaceOptions {
			return k8s.NamespaceOptions{Create: create, PodSecurity: spec.PodSecurityBaseline}
		}
		warnings := func() []lager.LogFormat {
			var out []lager.LogFormat
			for _, l := range logger.Logs() {
				if l.Message == "ns.namespace-pod-security" {
					out = append(out, l)
				}
			}
			return out
		}
		withLabels := func(labels map[string]string) *corev1.Namespace {
			return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps", Labels: labels}}
		}

		It("accepts an existing namespace that enforces the apps' pod security level, without a warning", func() {
			client := newClient(withLabels(map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}))
			Expect(k8s.EnsureNamespace(ctx, client, "apps", opts(false), logger)).To(Succeed())
			Expect(actionsSince(client, 0)).To(Equal([]string{"get namespaces apps"}))
			Expect(logger.LogMessages()).To(BeEmpty())
		})

		It("creates a missing namespace when asked to, enforcing the apps' pod security level", func() {
			client := newClient()
			Expect(k8s.EnsureNamespace(ctx, client, "apps", k8s.NamespaceOptions{Create: true, PodSecurity: spec.PodSecurityRestricted}, logger)).To(Succeed())
			Expect(actionsSince(client, 0)).To(Equal([]string{"get namespaces apps", "create namespaces apps"}))
			ns, err := client.CoreV1().Namespaces().Get(ctx, "apps", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(ns.Labels).To(Equal(map[string]string{
				"app.kubernetes.io/managed-by":               "opi",
				"pod-security.kubernetes.io/enforce":         "restricted",
				"pod-security.kubernetes.io/enforce-version": "latest",
			}))
			Expect(logger.LogMessages()).To(BeEmpty())
		})

		DescribeTable("warns at start-up about an existing namespace that does not enforce the level, and changes nothing",
			func(labels map[string]string, note string) {
				client := newClient(withLabels(labels))
				Expect(k8s.EnsureNamespace(ctx, client, "apps", opts(true), logger)).To(Succeed())
				Expect(actionsSince(client, 0)).To(Equal([]string{"get namespaces apps"}))
				Expect(warnings()).To(HaveLen(1))
				Expect(warnings()[0].Data).To(HaveKeyWithValue("note", ContainSubstring(note)))
				Expect(warnings()[0].Data).To(HaveKeyWithValue("fix", "kubectl label namespace apps pod-security.kubernetes.io/enforce=baseline pod-security.kubernetes.io/enforce-version=latest --overwrite"))
			},
			Entry("no label", nil, "enforces no Pod Security Standard"),
			Entry("privileged", map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}, "weaker"),
			Entry("an unknown level", map[string]string{"pod-security.kubernetes.io/enforce": "lax"}, "weaker"),
			Entry("restricted, stricter than baseline", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}, "refuses the apps' pods"),
		)

		It("reports a missing namespace otherwise", func() {
			client := newClient()
			err := k8s.EnsureNamespace(ctx, client, "apps", opts(false), logger)
			Expect(err).To(MatchError(ContainSubstring(`namespace "apps" does not exist`)))
			Expect(actionsSince(client, 0)).To(Equal([]string{"get namespaces apps"}))
		})

		It("reports a namespace it may not read", func() {
			client := newClient()
			client.PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "apps", nil)
			})
			Expect(k8s.EnsureNamespace(ctx, client, "apps", opts(true), logger)).To(MatchError(ContainSubstring("not allowed to read")))
		})

		It("reports an unreachable API server as unavailable", func() {
			client := newClient()
			client.PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, connectionRefused
			})
			Expect(k8s.EnsureNamespace(ctx, client, "apps", opts(true), logger)).To(MatchError(opi.ErrUnavailable))
		})
	})
})
