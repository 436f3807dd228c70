package k8s_test

import (
	"context"
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/kube"
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
		client = newClient()
		backend = startBackend(client)
		lrp = sampleLRP()
		name = k8s.DeploymentName(lrp)
	})

	It("replaces a Service still owned by the stopped Deployment, which the garbage collector would delete", func() {
		// What a stop leaves for a moment: the Deployment gone, its Service not collected yet.
		stale := &corev1.Service{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace, UID: "stale-uid",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: "gone", Controller: ptr.To(true)}},
		}}
		_, err := client.CoreV1().Services(namespace).Create(ctx, stale, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		before := len(client.Actions())

		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		Expect(actionsSince(client, before)).To(Equal([]string{
			"create secrets " + name + "-env",
			"create deployments " + name,
			"patch secrets " + name + "-env",
			"create services " + name,
			"get services " + name,
			"get deployments " + name, // still the live Deployment?
			"delete services " + name,
			"create services " + name,
			"create poddisruptionbudgets " + name,
		}))
		Expect(metav1.IsControlledBy(getService(client, name), getDeployment(client, name))).To(BeTrue())
	})

	It("keeps a Service a concurrent desire of the same Deployment made", func() {
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		d := getDeployment(client, name)
		// Desire again as if this call had made the Deployment and another call the Service.
		Expect(client.AppsV1().Deployments(namespace).Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() error { _, err := backend.GetLRP(ctx, lrp.LRPIdentifier); return err }).Should(MatchError(opi.ErrNotFound))
		svc := getService(client, name)
		Expect(metav1.IsControlledBy(svc, d)).To(BeTrue())

		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		fresh := getDeployment(client, name)
		Expect(fresh.UID).NotTo(Equal(d.UID))
		Expect(metav1.IsControlledBy(getService(client, name), fresh)).To(BeTrue())
		Expect(metav1.IsControlledBy(getSecret(client, name+"-env"), fresh)).To(BeTrue())
	})

	Describe("overtaken by a stop and another desire while it runs", func() {
		// Another desire (B) runs between this desire's (A's) Deployment create and its owner
		// patch: a stop deletes A's Deployment, B creates the next one and owns the Secret.
		var d2 *appsv1.Deployment

		BeforeEach(func() {
			overtaken := false
			client.PrependReactor("patch", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if overtaken {
					return false, nil, nil
				}
				overtaken = true
				tracker := client.Tracker()
				gvr := appsv1.SchemeGroupVersion.WithResource("deployments")
				obj, err := tracker.Get(gvr, namespace, name)
				Expect(err).NotTo(HaveOccurred())
				d2 = obj.(*appsv1.Deployment).DeepCopy()
				d2.UID, d2.ResourceVersion = "uid-b", "9001"
				Expect(tracker.Delete(gvr, namespace, name)).To(Succeed())
				Expect(tracker.Create(gvr, d2, namespace)).To(Succeed())
				secretGVR := corev1.SchemeGroupVersion.WithResource("secrets")
				obj, err = tracker.Get(secretGVR, namespace, name+"-env")
				Expect(err).NotTo(HaveOccurred())
				s := obj.(*corev1.Secret).DeepCopy()
				s.OwnerReferences = []metav1.OwnerReference{kube.ControllerRef(d2, "apps/v1", "Deployment")}
				s.ResourceVersion = "9002"
				Expect(tracker.Update(secretGVR, s, namespace)).To(Succeed())
				return true, nil, apierrors.NewConflict(secretGVR.GroupResource(), name+"-env", errors.New("the object has been modified"))
			})
		})

		It("leaves the Secret to the live Deployment and makes nothing for its deleted one", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			Expect(metav1.IsControlledBy(getSecret(client, name+"-env"), d2)).To(BeTrue())
			_, err := client.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Service for a Deployment that is gone")
			Expect(actionsSince(client, 0)).To(ContainElements(
				"patch secrets "+name+"-env", "get secrets "+name+"-env", "get deployments "+name))
			Expect(actionsSince(client, 0)).NotTo(ContainElement("delete secrets " + name + "-env"))
		})
	})
})
