package store_test

import (
	"context"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("Workloads opi wrote that the watch has not delivered", func() {
	const ns = "cf-workloads"
	var (
		ctx    context.Context
		client *fake.Clientset
		s      *store.Store
		id     opi.LRPIdentifier
	)

	deployment := func(name string, replicas int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
				names.LabelGUID: id.GUID, names.LabelVersion: id.Version, names.LabelAppGUID: "app-1",
			}},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
		}
	}
	create := func(d *appsv1.Deployment) *appsv1.Deployment {
		GinkgoHelper()
		got, err := client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		return got
	}
	cached := func() int { return s.CachedWorkloadCount() }
	replicasRead := func() int32 {
		GinkgoHelper()
		w := s.Workload(id)
		Expect(w).NotTo(BeNil())
		return w.ReplicaCount
	}

	BeforeEach(func() {
		ctx = context.Background()
		id = opi.LRPIdentifier{GUID: "guid-1", Version: "v1"}
		client = backendtest.NewClient() // versions and uids as an API server gives them
		factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
		s = store.New(store.Config{
			Namespace: ns,
			Workloads: factory.Apps().V1().Deployments().Informer(),
			Pods:      factory.Core().V1().Pods().Informer(),
			Jobs:      factory.Batch().V1().Jobs().Informer(),
			Resources: [3]string{"deployments", "pods", "jobs"},
			KindName:  "deployment",
			Logger:    lagertest.NewTestLogger("store"),
		})
		stop := make(chan struct{})
		DeferCleanup(func() { close(stop) })
		factory.Start(stop)
		factory.WaitForCacheSync(stop)
		// The fake clientset's watch sees only what is created after it is open.
		Eventually(func() int {
			n := 0
			for _, a := range client.Actions() {
				if a.GetVerb() == "watch" {
					n++
				}
			}
			return n
		}).Should(Equal(3))
		s.SetSynced()
	})

	It("are read by name, by LRP, by app and in the list at once, and the list's version moves", func() {
		before := s.WorkloadChanges()
		// Written, but not through this client: its watch never delivers it.
		d := deployment("app-a", 2)
		d.UID, d.ResourceVersion = "uid-a", "7"
		s.Wrote(d)

		Expect(s.WorkloadChanges()).To(BeNumerically(">", before))
		w, found := s.WorkloadByName("app-a")
		Expect(found).To(BeTrue())
		Expect(w.UID).To(BeEquivalentTo("uid-a"))
		Expect(replicasRead()).To(BeEquivalentTo(2))
		Expect(s.Workloads()).To(HaveLen(1))
		_, found = s.AppEgressRules("app-1")
		Expect(found).To(BeTrue())
		Expect(cached()).To(BeZero())
	})

	It("give way to the cache once the watch delivers them, and to any later version it delivers", func() {
		d := create(deployment("app-a", 2))
		s.Wrote(d)
		Eventually(cached).Should(Equal(1))

		d.Spec.Replicas = ptr.To[int32](4)
		updated, err := client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(replicasRead).Should(BeEquivalentTo(4))

		// An older version written after the cache has a later one changes nothing.
		before := s.WorkloadChanges()
		s.Wrote(d.DeepCopy())
		d.ResourceVersion = "1"
		s.Wrote(d)
		Expect(replicasRead()).To(BeEquivalentTo(4))
		Expect(s.WorkloadChanges()).To(Equal(before))
		Expect(updated.ResourceVersion).NotTo(Equal("1"))
	})

	It("are not read once the watch delivered their delete, even when written after it", func() {
		d := create(deployment("app-a", 2))
		Eventually(cached).Should(Equal(1))
		Expect(client.AppsV1().Deployments(ns).Delete(ctx, "app-a", metav1.DeleteOptions{})).To(Succeed())
		Eventually(cached).Should(BeZero())

		// The desire that created it answers after its delete came (a stop raced it).
		s.Wrote(d)
		Expect(s.Workload(id)).To(BeNil())
		Expect(s.Workloads()).To(BeEmpty())
	})

	It("give way to a namesake the watch delivers that was created after them", func() {
		old := deployment("app-a", 2)
		old.UID, old.ResourceVersion = "uid-old", "1"
		s.Wrote(old)
		got := create(deployment("app-a", 3))
		Expect(got.ResourceVersion).NotTo(BeEmpty(), "the client numbers versions as an API server does")
		Eventually(cached).Should(Equal(1))
		Eventually(replicasRead).Should(BeEquivalentTo(3))
		w, _ := s.WorkloadByName("app-a")
		Expect(w.UID).NotTo(BeEquivalentTo("uid-old"))
	})

	It("are no longer read after a minute the watch never confirmed them in", func() {
		store.SetWrittenTTL(s, 50*time.Millisecond)
		d := deployment("app-a", 2)
		d.UID, d.ResourceVersion = "uid-a", "7"
		s.Wrote(d)
		Expect(s.Workloads()).To(HaveLen(1))
		version := s.WorkloadChanges()
		Eventually(s.Workloads).Should(BeEmpty())
		Expect(s.WorkloadChanges()).To(BeNumerically(">", version), "the list's version moves with it")
	})
})
