package k8s_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/opi-bridge/opi/k8s"
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
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: "gone", Controller: ptrTo(true)}},
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
			"delete services " + name,
			"create services " + name,
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
})
