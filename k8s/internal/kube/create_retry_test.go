package kube_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opi-bridge/opi/k8s/internal/kube"
)

var _ = Describe("CreateOrGet racing a delete", func() {
	It("creates again when the existing object is deleted between the create and the read", func() {
		client := fake.NewClientset()
		creates := 0
		client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			creates++
			if creates == 1 {
				// It existed when created, and was gone by the time it was read.
				return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, "s")
			}
			return false, nil, nil
		})
		got, created, err := kube.CreateOrGet(context.Background(), client.CoreV1().Secrets("ns"), secret("s"), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(created).To(BeTrue())
		Expect(got.Name).To(Equal("s"))
		Expect(verbs(client)).To(Equal([]string{"create", "get", "create"}))
	})

	It("gives up after a few rounds", func() {
		client := fake.NewClientset()
		client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, "s")
		})
		cached := func(string) (*corev1.Secret, bool) { return nil, false }
		_, _, err := kube.CreateOrGet(context.Background(), client.CoreV1().Secrets("ns"), secret("s"), cached)
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
		Expect(verbs(client)).To(Equal([]string{"create", "get", "create", "get", "create", "get"}))
	})
})
