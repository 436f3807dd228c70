package lrp_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("UpdateLRP", func() {
	var (
		ctx     context.Context
		client  *fake.Clientset
		backend *k8s.Backend
		lrp     *opi.LRP
		name    string
		before  int
		update  opi.LRPUpdate
	)

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		backend = backendtest.StartBackend(client)
		lrp = backendtest.SampleLRP()
		name = names.DeploymentName(lrp)
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		before = len(client.Actions())
		update = opi.LRPUpdate{
			Instances:  ptr.To(int32(5)),
			Annotation: ptr.To("2.0"),
			Routes:     &[]opi.Route{{Hostname: "a.example.com", Port: 8080}, {Hostname: "b.example.com", Port: 9090}},
			Image:      ptr.To("busybox:1.37"),
		}
	})

	It("changes replicas, the annotation, routes and image with one update", func() {
		Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, update)).To(Succeed())
		Expect(backendtest.ActionsSince(client, before)).To(Equal([]string{
			"create poddisruptionbudgets " + name, // made by the desire: found, kept
			"patch deployments " + name,           // the hooks act first, the patch with the token last
		}))

		d := backendtest.GetDeployment(client, name)
		Expect(*d.Spec.Replicas).To(Equal(int32(5)))
		Expect(d.Annotations).To(HaveKeyWithValue("opi-bridge.io/last-updated", "2.0"))
		Expect(d.Annotations).To(HaveKeyWithValue("opi-bridge.io/routes",
			`[{"hostname":"a.example.com","port":8080},{"hostname":"b.example.com","port":9090}]`))
		Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("busybox:1.37"))
	})

	Describe("the pod disruption budget", func() {
		budgets := func() []string {
			list, err := client.PolicyV1().PodDisruptionBudgets(backendtest.Namespace).List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred())
			names := []string{}
			for _, p := range list.Items {
				names = append(names, p.Name)
			}
			return names
		}
		scale := func(n int32) []string {
			from := len(client.Actions())
			Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Instances: ptr.To(n)})).To(Succeed())
			actions := backendtest.ActionsSince(client, from)
			Eventually(func() int32 {
				got, err := backend.GetLRP(ctx, lrp.LRPIdentifier)
				Expect(err).NotTo(HaveOccurred())
				return got.Instances
			}).Should(Equal(n))
			return actions
		}

		It("is removed below 2 instances and made again from 2, owned by the deployment", func() {
			Expect(budgets()).To(Equal([]string{name}))

			Expect(scale(1)).To(Equal([]string{"delete poddisruptionbudgets " + name, "patch deployments " + name}))
			Expect(budgets()).To(BeEmpty())

			Expect(scale(0)).To(Equal([]string{"patch deployments " + name}), "nothing to delete")

			Expect(scale(3)).To(Equal([]string{"create poddisruptionbudgets " + name, "patch deployments " + name}))
			Expect(budgets()).To(Equal([]string{name}))
			pdb, err := client.PolicyV1().PodDisruptionBudgets(backendtest.Namespace).Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(metav1.IsControlledBy(pdb, backendtest.GetDeployment(client, name))).To(BeTrue())
			Expect(pdb.Spec.MaxUnavailable.IntValue()).To(Equal(1))

			Expect(scale(5)).To(Equal([]string{"create poddisruptionbudgets " + name, "patch deployments " + name}),
				"maxUnavailable 1 holds at any count: the budget is only looked for")
		})

		It("is left alone by updates that do not scale", func() {
			Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Annotation: ptr.To("3.0")})).To(Succeed())
			Expect(backendtest.ActionsSince(client, before)).To(Equal([]string{"patch deployments " + name}))
		})
	})

	It("is visible to reads as soon as it returns", func() {
		Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, update)).To(Succeed())
		got, err := backend.GetLRP(ctx, lrp.LRPIdentifier)
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Instances).To(Equal(int32(5)))
		Expect(got.LastUpdated).To(Equal("2.0"))
		Expect(got.Image).To(Equal("busybox:1.37"))
		Expect(got.Routes).To(Equal(*update.Routes))
	})

	It("leaves fields that are not given alone", func() {
		Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Instances: ptr.To(int32(3))})).To(Succeed())
		d := backendtest.GetDeployment(client, name)
		Expect(*d.Spec.Replicas).To(Equal(int32(3)))
		Expect(d.Annotations).To(HaveKeyWithValue("opi-bridge.io/last-updated", lrp.LastUpdated))
		Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(lrp.Image))
	})

	It("writes nothing when nothing changes", func() {
		same := opi.LRPUpdate{Instances: ptr.To(lrp.Instances), Annotation: ptr.To(lrp.LastUpdated)}
		Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, same)).To(Succeed())
		Expect(backendtest.ActionsSince(client, before)).To(BeEmpty())
	})

	It("patches the fields the update gives, without a resourceVersion, so that it cannot conflict", func() {
		var patches []string
		client.PrependReactor("patch", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
			patches = append(patches, string(a.(k8stesting.PatchAction).GetPatch()))
			return false, nil, nil
		})
		Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Instances: ptr.To(int32(7)), Annotation: ptr.To(lrp.LastUpdated)})).To(Succeed())
		Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Image: ptr.To("busybox:2")})).To(Succeed())
		Expect(patches).To(HaveLen(2))
		Expect(patches[0]).To(MatchJSON(`{"metadata":{"annotations":{"opi-bridge.io/last-updated":"1600000000.2499998"}},"spec":{"replicas":7}}`))
		Expect(patches[1]).To(MatchJSON(`{"spec":{"template":{"spec":{"containers":[{"name":"opi","image":"busybox:2"}]}}}}`))

		By("keeping the rest of the pod spec: env, probes and resources")
		c := backendtest.GetDeployment(client, name).Spec.Template.Spec.Containers[0]
		Expect(c.Image).To(Equal("busybox:2"))
		Expect(c.Env).NotTo(BeEmpty())
		Expect(c.ReadinessProbe).NotTo(BeNil())
		Expect(c.Resources.Limits.Memory().String()).To(Equal("256Mi"))
	})

	It("answers ErrNotFound when the deployment went away under it", func() {
		client.PrependReactor("patch", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, name)
		})
		Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, update)).To(MatchError(opi.ErrNotFound))
	})

	It("returns ErrNotFound for an absent LRP, after one live list", func() {
		err := backend.UpdateLRP(ctx, opi.LRPIdentifier{GUID: "nope", Version: "v1"}, update)
		Expect(err).To(MatchError(opi.ErrNotFound))
		Expect(backendtest.ActionsSince(client, before)).To(Equal([]string{"list deployments"}))
	})
})
