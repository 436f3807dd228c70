package kube_test

import (
	"unsafe"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/internal/kube"
)

var _ = Describe("WithoutManagedFields", func() {
	managed := []metav1.ManagedFieldsEntry{{Manager: "opi", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}}

	It("caches a copy without the managed fields and leaves the object it was handed as it was", func() {
		in := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "route", Labels: map[string]string{"a": "b"}, ResourceVersion: "7", ManagedFields: managed},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
		}
		out, err := kube.WithoutManagedFields[corev1.Service](in)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(Equal(&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "route", Labels: map[string]string{"a": "b"}, ResourceVersion: "7"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
		}))
		Expect(in.ManagedFields).To(Equal(managed))
	})

	It("passes an object without managed fields, another type and a tombstone unchanged", func() {
		bare := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "route"}}
		out, err := kube.WithoutManagedFields[corev1.Service](bare)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(BeIdenticalTo(bare))

		ingress := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "route", ManagedFields: managed}}
		out, err = kube.WithoutManagedFields[corev1.Service](ingress)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(BeIdenticalTo(ingress))

		tombstone := cache.DeletedFinalStateUnknown{Key: "ns/route", Obj: ingress}
		out, err = kube.WithoutManagedFields[networkingv1.Ingress](tombstone)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(Equal(tombstone))
	})
})

var _ = Describe("Compacted", func() {
	// decoded is a Service as a watch hands it over: decoded from protobuf, each string its own.
	decoded := func(name, space string) *corev1.Service {
		in := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "cf-apps", ResourceVersion: "7",
				Labels:        map[string]string{"opi-bridge.io/source-type": "ROUTE", "opi-bridge.io/route-key": name},
				Annotations:   map[string]string{"opi-bridge.io/space-guid": space},
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "opi", Operation: metav1.ManagedFieldsOperationUpdate}}},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
		}
		data, err := in.Marshal()
		Expect(err).NotTo(HaveOccurred())
		out := &corev1.Service{}
		Expect(out.Unmarshal(data)).To(Succeed())
		return out
	}
	same := func(a, b string) bool { return a == b && unsafe.StringData(a) == unsafe.StringData(b) }
	keyOf := func(m map[string]string, key string) string {
		for k := range m {
			if k == key {
				return k
			}
		}
		return ""
	}

	It("keeps one copy of the keys, the namespace and the shared values, and nothing of the managed fields", func() {
		transform := kube.Compacted[corev1.Service]("opi-bridge.io/source-type", "opi-bridge.io/space-guid")
		a, b := decoded("route-a", "space-1"), decoded("route-b", "space-1")
		Expect(same(a.Namespace, b.Namespace)).To(BeFalse(), "decoded apart")
		ca, err := transform(a)
		Expect(err).NotTo(HaveOccurred())
		cb, err := transform(b)
		Expect(err).NotTo(HaveOccurred())
		x, y := ca.(*corev1.Service), cb.(*corev1.Service)

		Expect(same(x.Namespace, y.Namespace)).To(BeTrue())
		for _, key := range []string{"opi-bridge.io/source-type", "opi-bridge.io/route-key"} {
			Expect(same(keyOf(x.Labels, key), keyOf(y.Labels, key))).To(BeTrue(), key)
		}
		Expect(same(keyOf(x.Annotations, "opi-bridge.io/space-guid"), keyOf(y.Annotations, "opi-bridge.io/space-guid"))).To(BeTrue())
		Expect(same(x.Labels["opi-bridge.io/source-type"], y.Labels["opi-bridge.io/source-type"])).To(BeTrue())
		Expect(same(x.Annotations["opi-bridge.io/space-guid"], y.Annotations["opi-bridge.io/space-guid"])).To(BeTrue())

		want := a.DeepCopy()
		want.ManagedFields = nil
		Expect(x).To(Equal(want), "the same object otherwise")
		Expect(a.ManagedFields).To(HaveLen(1), "the object handed over is left as it was")
	})

	It("passes anything else unchanged", func() {
		tombstone := cache.DeletedFinalStateUnknown{Key: "cf-apps/route-a"}
		out, err := kube.Compacted[corev1.Service]()(tombstone)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(Equal(tombstone))
	})
})
