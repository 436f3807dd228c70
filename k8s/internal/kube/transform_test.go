package kube_test

import (
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
