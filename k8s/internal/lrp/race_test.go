package lrp_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("DesireLRP after a stop of the same LRP", func() {
	var (
		ctx     context.Context
		client  *fake.Clientset
		backend *k8s.Backend
		lrp     *opi.LRP
		name    string
	)

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		backend = backendtest.StartBackend(client)
		lrp = backendtest.SampleLRP()
		name = names.DeploymentName(lrp)
	})

	It("replaces a Service still owned by the stopped Deployment, which the garbage collector would delete", func() {
		// What a stop leaves for a moment: the Deployment gone, its Service not collected yet.
		stale := &corev1.Service{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: backendtest.Namespace, UID: "stale-uid",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: "gone", Controller: ptr.To(true)}},
		}}
		_, err := client.CoreV1().Services(backendtest.Namespace).Create(ctx, stale, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		before := len(client.Actions())

		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, before), "create deployments "+name, []backendtest.Step{
			{"create secrets " + name + "-env"},
		}, []backendtest.Step{
			{
				"create services " + name,
				"get services " + name,
				"get deployments " + name, // still the live Deployment?
				"delete services " + name,
				"create services " + name,
			},
			{"create poddisruptionbudgets " + name},
		})
		Expect(metav1.IsControlledBy(backendtest.GetService(client, name), backendtest.GetDeployment(client, name))).To(BeTrue())
	})

	It("keeps a Service a concurrent desire of the same Deployment made", func() {
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		d := backendtest.GetDeployment(client, name)
		// Desire again as if this call had made the Deployment and another call the Service.
		Expect(client.AppsV1().Deployments(backendtest.Namespace).Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() error { _, err := backend.GetLRP(ctx, lrp.LRPIdentifier); return err }).Should(MatchError(opi.ErrNotFound))
		svc := backendtest.GetService(client, name)
		Expect(metav1.IsControlledBy(svc, d)).To(BeTrue())

		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		fresh := backendtest.GetDeployment(client, name)
		Expect(fresh.UID).NotTo(Equal(d.UID))
		Expect(metav1.IsControlledBy(backendtest.GetService(client, name), fresh)).To(BeTrue())
		Expect(metav1.IsControlledBy(backendtest.GetSecret(client, name+"-env"), fresh)).To(BeTrue())
	})

	Describe("overtaken by a stop and another desire while it runs", func() {
		// Another desire (B) runs between this desire's (A's) Deployment create and its env
		// Secret create: a stop deletes A's Deployment, B creates the next one and its Secret
		// (owned by B's Deployment, as a desire makes it again when a stop's Deployment still
		// owned it). A's Secret create is made to wait for its Deployment create.
		var (
			uidA   types.UID
			d2     *appsv1.Deployment
			secret *corev1.Secret
		)

		BeforeEach(func() {
			backend = backendtest.StartBackendThrough(client, newGatedClient(client, false), k8s.Options{})
			overtaken := false // reactors run one at a time, under the fake's lock
			client.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if overtaken {
					return false, nil, nil
				}
				overtaken = true
				tracker := client.Tracker()
				gvr := appsv1.SchemeGroupVersion.WithResource("deployments")
				obj, err := tracker.Get(gvr, backendtest.Namespace, name)
				if err != nil {
					return true, nil, err
				}
				d2 = obj.(*appsv1.Deployment).DeepCopy()
				uidA = d2.UID
				d2.UID, d2.ResourceVersion = "uid-b", "9001"
				if err := tracker.Delete(gvr, backendtest.Namespace, name); err != nil {
					return true, nil, err
				}
				if err := tracker.Create(gvr, d2, backendtest.Namespace); err != nil {
					return true, nil, err
				}
				secretGVR := corev1.SchemeGroupVersion.WithResource("secrets")
				secret = a.(k8stesting.CreateAction).GetObject().(*corev1.Secret).DeepCopy()
				secret.UID, secret.ResourceVersion = "secret-of-b", "9002"
				secret.OwnerReferences = []metav1.OwnerReference{kube.ControllerRef(d2, "apps/v1", "Deployment")}
				if err := tracker.Create(secretGVR, secret, backendtest.Namespace); err != nil {
					return true, nil, err
				}
				return true, nil, apierrors.NewAlreadyExists(secretGVR.GroupResource(), name+"-env")
			})
		})

		It("leaves the Secret to the live Deployment and owns nothing for its deleted one", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			got := backendtest.GetSecret(client, name+"-env")
			Expect(got.UID).To(Equal(secret.UID), "B's Secret, not made again")
			Expect(metav1.IsControlledBy(got, d2)).To(BeTrue())
			calls := backendtest.ActionsSince(client, 0)
			Expect(calls).To(ContainElements("get secrets "+name+"-env", "get deployments "+name))
			Expect(calls).NotTo(ContainElement(HavePrefix("patch secrets")))
			Expect(calls).NotTo(ContainElement(HavePrefix("delete secrets")))
			Expect(calls).To(HaveEach(Not(HavePrefix("delete deployments"))), "B's Deployment is left")
			Expect(backendtest.GetDeployment(client, name).UID).To(Equal(d2.UID))
			// What round 2 made for A at once with its Secret is controlled by A's Deployment,
			// which is gone: the garbage collector's.
			Expect(metav1.GetControllerOf(backendtest.GetService(client, name))).To(HaveField("UID", uidA))
		})
	})
})
