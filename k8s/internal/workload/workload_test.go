package workload_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/internal/workload"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

const namespace = "cf-workloads"

func lrp() *opi.LRP {
	return &opi.LRP{
		LRPIdentifier: opi.LRPIdentifier{GUID: "8a3d6a87-0d35-4ad7-a6d3-2c0ef0d3bb2a", Version: "f4a19c5e"},
		ProcessType:   "web",
		AppGUID:       "app-guid",
		AppName:       "My App",
		SpaceName:     "dev",
		Image:         "busybox:1.36",
		Instances:     3,
		MemoryMB:      256,
		DiskMB:        512,
	}
}

// verbs are the client's actions as "verb resource name" (name only where the action has one).
func verbs(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		s := a.GetVerb() + " " + a.GetResource().Resource
		switch a := a.(type) {
		case k8stesting.CreateAction:
			s += " " + a.GetObject().(metav1.Object).GetName()
		case k8stesting.GetAction:
			s += " " + a.GetName()
		case k8stesting.PatchAction:
			s += " " + a.GetName()
		case k8stesting.DeleteAction:
			s += " " + a.GetName()
		}
		Expect(a.GetNamespace()).To(Equal(namespace))
		out = append(out, s)
	}
	return out
}

var _ = Describe("The workload kinds", func() {
	w := objects.Workload{MinReadySeconds: 10, PodSecurity: objects.PodSecurityBaseline}

	DescribeTable("each reads and writes its own objects in its namespace, through the client handed in",
		func(name, kind, resource string, indexed bool) {
			ctx := context.Background()
			client := fake.NewClientset()
			k := workload.New(name, workload.Config{Apps: client.AppsV1(), Namespace: namespace})
			Expect(k.Name()).To(Equal(kind))
			Expect(k.IndexedByOrdinal()).To(Equal(indexed))

			built := k.Build(desire("my-app-8a3d6a870d", w))
			Expect(built.Kind).To(Equal(resource[:len(resource)-1]))
			Expect(built.Meta).To(BeIdenticalTo(must(meta(built.Obj))))
			Expect(built.Meta.Namespace).To(Equal(namespace))
			Expect(*built.Template).To(Equal(desire("my-app-8a3d6a870d", w).Template))
			Expect(built.Size()).To(BeNumerically(">", 0))

			obj, created, err := k.Create(ctx, built)
			Expect(err).NotTo(HaveOccurred())
			Expect(created).To(BeTrue())
			_, created, err = k.Create(ctx, k.Build(desire("my-app-8a3d6a870d", w)))
			Expect(err).NotTo(HaveOccurred())
			Expect(created).To(BeFalse())

			got, err := k.Get(ctx, obj.GetName())
			Expect(err).NotTo(HaveOccurred())
			Expect(got.GetUID()).To(Equal(obj.GetUID()))
			list, err := k.List(ctx, metav1.ListOptions{LabelSelector: names.LRPSelector(lrp().LRPIdentifier)})
			Expect(err).NotTo(HaveOccurred())
			Expect(list).To(HaveLen(1))
			Expect(list[0].Meta.Name).To(Equal("my-app-8a3d6a870d"))
			Expect(*list[0].Replicas).To(BeEquivalentTo(3))
			Expect(list[0].Template.Spec.Containers[0].Image).To(Equal("busybox:1.36"))

			patched, err := k.Patch(ctx, obj.GetName(), []byte(`{"spec":{"replicas":5}}`))
			Expect(err).NotTo(HaveOccurred())
			Expect(patched.GetName()).To(Equal(obj.GetName()))
			Expect(k.Delete(ctx, obj.GetName(), metav1.DeleteOptions{})).To(Succeed())

			Expect(k.ControllerRef(obj)).To(Equal(metav1.OwnerReference{
				APIVersion: "apps/v1", Kind: kind, Name: obj.GetName(), UID: obj.GetUID(),
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}))
			n := "my-app-8a3d6a870d"
			Expect(verbs(client)).To(Equal([]string{
				"create " + resource + " " + n, "create " + resource + " " + n, "get " + resource + " " + n,
				"get " + resource + " " + n, "list " + resource, "patch " + resource + " " + n, "delete " + resource + " " + n,
			}))
		},
		Entry("Deployment (the default)", "", "Deployment", "deployments", false),
		Entry("Deployment", workload.Deployments, "Deployment", "deployments", false),
		Entry("StatefulSet", workload.StatefulSets, "StatefulSet", "statefulsets", true),
	)

	It("builds a StatefulSet with the Deployment's metadata and pod template", func() {
		d := workload.New(workload.Deployments, workload.Config{Namespace: namespace}).Build(desire("n", w))
		s := workload.New(workload.StatefulSets, workload.Config{Namespace: namespace}).Build(desire("n", w))
		Expect(s.Obj).To(BeAssignableToTypeOf(&appsv1.StatefulSet{}))
		Expect(d.Obj).To(BeAssignableToTypeOf(&appsv1.Deployment{}))
		Expect(*s.Meta).To(Equal(*d.Meta))
		Expect(*s.Template).To(Equal(*d.Template))
		Expect(s.Obj.(*appsv1.StatefulSet).Spec.PodManagementPolicy).To(Equal(appsv1.ParallelPodManagement))
	})

	DescribeTable("answers an existing workload from the cache look-up without reading it",
		func(name string) {
			ctx := context.Background()
			client := fake.NewClientset()
			cachedMeta := metav1.ObjectMeta{Name: "n", Namespace: namespace, UID: "cached-uid", ResourceVersion: "7"}
			k := workload.New(name, workload.Config{
				Apps: client.AppsV1(), Namespace: namespace,
				Cached: func(n string) (metav1.ObjectMeta, int32, bool) { return cachedMeta, 4, n == "n" },
			})
			_, _, err := k.Create(ctx, k.Build(desire("n", w)))
			Expect(err).NotTo(HaveOccurred())
			obj, created, err := k.Create(ctx, k.Build(desire("n", w)))
			Expect(err).NotTo(HaveOccurred())
			Expect(created).To(BeFalse())
			Expect(obj.GetUID()).To(BeEquivalentTo("cached-uid"))
			for _, a := range client.Actions() {
				Expect(a.GetVerb()).To(Equal("create"))
			}
		},
		Entry("Deployment", workload.Deployments),
		Entry("StatefulSet", workload.StatefulSets),
	)

	DescribeTable("gives the backend's factory's informer of its kind",
		func(name string, want func(informers.SharedInformerFactory) cache.SharedIndexInformer) {
			f := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
			k := workload.New(name, workload.Config{Namespace: namespace})
			Expect(k.Informer(f).GetIndexer()).To(BeIdenticalTo(want(f).GetIndexer()))
		},
		Entry("Deployment", workload.Deployments, func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Apps().V1().Deployments().Informer()
		}),
		Entry("StatefulSet", workload.StatefulSets, func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Apps().V1().StatefulSets().Informer()
		}),
	)
})

// desire is lrp()'s desire in namespace, its workload named name.
func desire(name string, w objects.Workload) *objects.Desire {
	d, err := objects.ForDesire(lrp(), namespace, w)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	d.Identity.Name, d.Meta.Name = name, name
	return &d
}

func must[T any](v T, err error) T {
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return v
}

func meta(obj metav1.Object) (*metav1.ObjectMeta, error) {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.ObjectMeta, nil
	case *appsv1.StatefulSet:
		return &o.ObjectMeta, nil
	}
	return nil, nil
}
