package lrp_test

import (
	"context"
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("Stopping", func() {
	var (
		ctx     context.Context
		client  *fake.Clientset
		backend *k8s.Backend
		lrp     *opi.LRP
		md      *metadatafake.FakeMetadataClient
		name    string
		before  int
	)

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		md = backendtest.NewMetadataClient(client)
		backend = backendtest.StartBackendWith(client, k8s.Options{Clients: k8s.Clients{Metadata: md}})
		lrp = backendtest.SampleLRP()
		name = names.DeploymentName(lrp)
	})

	Describe("StopLRP", func() {
		It("deletes the env secret by name, then the deployment with background propagation, and leaves owned objects to the GC", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			before = len(client.Actions())

			Expect(backend.StopLRP(ctx, lrp.LRPIdentifier)).To(Succeed())
			Expect(backendtest.ActionsSince(client, before)).To(Equal([]string{"delete secrets " + name + "-env", "delete deployments " + name}))
			del := client.Actions()[before+1].(k8stesting.DeleteAction)
			Expect(*del.GetDeleteOptions().PropagationPolicy).To(Equal(metav1.DeletePropagationBackground))
			_, secrets, _ := backendtest.CountObjects(client)
			Expect(secrets).To(BeZero())
			Expect(backendtest.GetService(client, name)).NotTo(BeNil())
		})

		It("deletes the registry secret beside the env secret, and succeeds when one is gone already", func() {
			lrp.PrivateRegistry = &opi.PrivateRegistry{Username: "user", Password: "pw"}
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			Expect(client.CoreV1().Secrets(backendtest.Namespace).Delete(ctx, name+"-env", metav1.DeleteOptions{})).To(Succeed())
			before = len(client.Actions())

			Expect(backend.StopLRP(ctx, lrp.LRPIdentifier)).To(Succeed())
			calls := backendtest.ActionsSince(client, before)
			Expect(calls[:2]).To(ConsistOf("delete secrets "+name+"-env", "delete secrets "+name+"-registry"))
			Expect(calls[2:]).To(Equal([]string{"delete deployments " + name}))
			_, secrets, _ := backendtest.CountObjects(client)
			Expect(secrets).To(BeZero())
		})

		It("deletes no deployment when a secret's delete fails, so that a retry finds the LRP", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			client.PrependReactor("delete", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewServiceUnavailable("etcd is down")
			})
			before = len(client.Actions())

			Expect(backend.StopLRP(ctx, lrp.LRPIdentifier)).To(MatchError(opi.ErrUnavailable))
			Expect(backendtest.ActionsSince(client, before)).To(Equal([]string{"delete secrets " + name + "-env"}))
			backendtest.GetDeployment(client, name)
		})

		It("makes the LRP disappear from reads as soon as it returns", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			Expect(backend.StopLRP(ctx, lrp.LRPIdentifier)).To(Succeed())
			_, err := backend.GetLRP(ctx, lrp.LRPIdentifier)
			Expect(err).To(MatchError(opi.ErrNotFound))
			Expect(backend.ListLRPs(ctx)).To(BeEmpty())
		})

		It("succeeds for an absent LRP", func() {
			before = len(client.Actions())
			Expect(backend.StopLRP(ctx, lrp.LRPIdentifier)).To(Succeed())
			Expect(backend.StopLRP(ctx, lrp.LRPIdentifier)).To(Succeed())
			Expect(backendtest.ActionsSince(client, before)).To(Equal([]string{"list deployments", "list deployments"}))
			// The unowned objects are looked for by their metadata only.
			Expect(backendtest.MetadataActions(md)).To(Equal([]string{
				"list secrets", "list services", "list secrets", "list services",
			}))
		})

		It("deletes secrets and a service no deployment owns", func() {
			labels := map[string]string{
				"opi-bridge.io/guid": lrp.GUID, "opi-bridge.io/version": lrp.Version, "opi-bridge.io/source-type": "APP",
			}
			for _, s := range []string{name + "-env", name + "-registry"} {
				_, err := client.CoreV1().Secrets(backendtest.Namespace).Create(ctx, &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: s, Namespace: backendtest.Namespace, Labels: labels},
				}, metav1.CreateOptions{})
				Expect(err).NotTo(HaveOccurred())
			}
			owned := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
				Name: "owned", Namespace: backendtest.Namespace, Labels: labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "x", UID: "u", Controller: ptr.To(true)}},
			}}
			_, err := client.CoreV1().Secrets(backendtest.Namespace).Create(ctx, owned, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			_, err = client.CoreV1().Services(backendtest.Namespace).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: backendtest.Namespace, Labels: labels},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			otherLabels := map[string]string{
				"opi-bridge.io/guid": "another-app", "opi-bridge.io/version": lrp.Version, "opi-bridge.io/source-type": "APP",
			}
			_, err = client.CoreV1().Secrets(backendtest.Namespace).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "another-app-env", Namespace: backendtest.Namespace, Labels: otherLabels},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			before = len(client.Actions())

			Expect(backend.StopLRP(ctx, lrp.LRPIdentifier)).To(Succeed())
			Expect(backendtest.ActionsSince(client, before)).To(Equal([]string{
				"list deployments",
				"delete secrets " + name + "-env",
				"delete secrets " + name + "-registry",
				"delete services " + name,
			}))
			Expect(backendtest.MetadataActions(md)).To(Equal([]string{"list secrets", "list services"}))
			_, secrets, services := backendtest.CountObjects(client)
			Expect(secrets).To(Equal(2), "the owned one and another app's")
			Expect(backendtest.GetSecret(client, "another-app-env")).NotTo(BeNil())
			Expect(services).To(BeZero())
		})

		It("leaves a secret a concurrent desire owned after the list", func() {
			_, err := client.CoreV1().Secrets(backendtest.Namespace).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name + "-env", Namespace: backendtest.Namespace, Labels: map[string]string{
					"opi-bridge.io/guid": lrp.GUID, "opi-bridge.io/version": lrp.Version, "opi-bridge.io/source-type": "APP",
				}},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			listed := backendtest.GetSecret(client, name+"-env")
			var preconditions *metav1.Preconditions
			client.PrependReactor("delete", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
				preconditions = a.(k8stesting.DeleteAction).GetDeleteOptions().Preconditions
				// Owned meanwhile: its version moved on, so the API server refuses the delete.
				return true, nil, apierrors.NewConflict(corev1.Resource("secrets"), name+"-env", errors.New("precondition failed"))
			})

			Expect(backend.StopLRP(ctx, lrp.LRPIdentifier)).To(Succeed())
			Expect(preconditions).NotTo(BeNil())
			Expect(*preconditions.UID).To(Equal(listed.UID))
			Expect(*preconditions.ResourceVersion).To(Equal(listed.ResourceVersion))
		})
	})

	Describe("StopInstance", func() {
		var t0 time.Time

		BeforeEach(func() {
			lrp.Instances = 3
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			t0 = time.Now().Add(-time.Hour)
			backendtest.CreatePod(client, backendtest.NewPod(lrp, "pod-c", t0, corev1.PodStatus{Phase: corev1.PodPending}))
			backendtest.CreatePod(client, backendtest.NewPod(lrp, "pod-b", t0.Add(time.Minute), corev1.PodStatus{Phase: corev1.PodPending}))
			backendtest.CreatePod(client, backendtest.NewPod(lrp, "pod-a", t0.Add(time.Minute), corev1.PodStatus{Phase: corev1.PodPending}))
			Eventually(func() []*opi.Instance {
				instances, _ := backend.GetInstances(ctx, lrp.LRPIdentifier)
				return instances
			}).Should(HaveLen(3))
			before = len(client.Actions())
		})

		It("deletes exactly the pod at the rank", func() {
			Expect(backend.StopInstance(ctx, lrp.LRPIdentifier, 1)).To(Succeed())
			Expect(backendtest.ActionsSince(client, before)).To(Equal([]string{"delete pods pod-a"}))
			del := client.Actions()[before].(k8stesting.DeleteAction)
			Expect(del.GetDeleteOptions().Preconditions.UID).NotTo(BeNil())

			instances, err := backend.GetInstances(ctx, lrp.LRPIdentifier)
			Expect(err).NotTo(HaveOccurred())
			Expect(instances).To(HaveLen(2), "the stopped instance is gone from reads at once")
		})

		DescribeTable("rejects an index outside 0..instances-1",
			func(index int32) {
				err := backend.StopInstance(ctx, lrp.LRPIdentifier, index)
				Expect(err).To(MatchError(opi.ErrInvalid))
				Expect(err.Error()).To(ContainSubstring("0..2"))
				Expect(backendtest.ActionsSince(client, before)).To(BeEmpty())
			},
			Entry("negative", int32(-1)),
			Entry("the desired count", int32(3)),
			Entry("beyond", int32(10)),
		)

		It("names the index in the error", func() {
			Expect(backend.StopInstance(ctx, lrp.LRPIdentifier, 7)).To(MatchError(ContainSubstring("index 7")))
		})

		It("succeeds without a call when no pod has the rank", func() {
			Expect(client.CoreV1().Pods(backendtest.Namespace).Delete(ctx, "pod-b", metav1.DeleteOptions{})).To(Succeed())
			Eventually(func() []*opi.Instance {
				instances, _ := backend.GetInstances(ctx, lrp.LRPIdentifier)
				return instances
			}).Should(HaveLen(2))
			before = len(client.Actions())
			Expect(backend.StopInstance(ctx, lrp.LRPIdentifier, 2)).To(Succeed())
			Expect(backendtest.ActionsSince(client, before)).To(BeEmpty())
		})

		It("returns ErrNotFound for an absent LRP", func() {
			err := backend.StopInstance(ctx, opi.LRPIdentifier{GUID: "nope", Version: "v"}, 0)
			Expect(err).To(MatchError(opi.ErrNotFound))
			Expect(backendtest.ActionsSince(client, before)).To(BeEmpty())
		})
	})
})
