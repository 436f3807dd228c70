package informer_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/internal/informer"
)

var _ = Describe("Unindexed", func() {
	It("is the factory's informer of the type, of one namespace's objects matching the selector, with no index", func() {
		pod := func(ns, name, source string) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"source": source}}}
		}
		client := fake.NewClientset(pod("apps", "a", "APP"), pod("apps", "t", "TASK"), pod("other", "b", "APP"))
		factory := informers.NewSharedInformerFactory(client, 0)
		inf := informer.Unindexed(factory, &corev1.Pod{}, "apps", "source=APP", coreinformers.NewFilteredPodInformer)
		Expect(factory.Core().V1().Pods().Informer().GetIndexer()).To(BeIdenticalTo(inf.GetIndexer()), "one informer per type in the factory")
		Expect(inf.GetIndexer().GetIndexers()).To(BeEmpty())

		ctx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		factory.Start(ctx.Done())
		Expect(cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)).To(BeTrue())
		Expect(inf.GetStore().ListKeys()).To(ConsistOf("apps/a"))
	})
})
