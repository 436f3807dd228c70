package kube_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opi-bridge/opi/k8s/internal/kube"
)

func verbs(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		out = append(out, a.GetVerb())
	}
	return out
}

func secret(name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
}

var _ = Describe("Classify", func() {
	gr := schema.GroupResource{Resource: "secrets"}
	DescribeTable("sorts errors into kinds",
		func(err error, kind kube.Kind) {
			Expect(kube.Classify(err)).To(Equal(kind), kind.String())
		},
		Entry("nil", nil, kube.KindOther),
		Entry("not found", apierrors.NewNotFound(gr, "x"), kube.KindNotFound),
		Entry("wrapped not found", fmt.Errorf("get: %w", apierrors.NewNotFound(gr, "x")), kube.KindNotFound),
		Entry("already exists", apierrors.NewAlreadyExists(gr, "x"), kube.KindAlreadyExists),
		Entry("conflict", apierrors.NewConflict(gr, "x", nil), kube.KindConflict),
		Entry("invalid", apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "x", nil), kube.KindInvalid),
		Entry("bad request", apierrors.NewBadRequest("x"), kube.KindInvalid),
		Entry("too large", apierrors.NewRequestEntityTooLargeError("x"), kube.KindInvalid),
		Entry("forbidden", apierrors.NewForbidden(gr, "x", nil), kube.KindForbidden),
		Entry("unauthorized", apierrors.NewUnauthorized("x"), kube.KindForbidden),
		Entry("503", apierrors.NewServiceUnavailable("x"), kube.KindUnavailable),
		Entry("429", apierrors.NewTooManyRequests("x", 1), kube.KindUnavailable),
		Entry("server timeout", apierrors.NewServerTimeout(gr, "get", 1), kube.KindUnavailable),
		Entry("gateway timeout", apierrors.NewTimeoutError("x", 1), kube.KindUnavailable),
		Entry("deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), kube.KindUnavailable),
		Entry("connection refused", &url.Error{Op: "Get", URL: "https://h", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}, kube.KindUnavailable),
		Entry("unknown host", &url.Error{Op: "Get", URL: "https://h", Err: &net.DNSError{Err: "no such host", Name: "h"}}, kube.KindUnavailable),
		Entry("internal error", apierrors.NewInternalError(errors.New("x")), kube.KindOther),
		Entry("anything else", errors.New("x"), kube.KindOther),
	)
})

var _ = Describe("Observed", func() {
	DescribeTable("tells whether a cache caught up with a write",
		func(cached, want string, observed bool) {
			Expect(kube.Observed(cached, want)).To(Equal(observed))
		},
		Entry("same", "42", "42", true),
		Entry("newer", "43", "42", true),
		Entry("older", "41", "42", false),
		Entry("numerically newer, not as strings", "100", "99", true),
		Entry("opaque and different", "abc", "abd", false),
		Entry("opaque and same", "abc", "abc", true),
	)
})

var _ = Describe("creating", func() {
	var client *fake.Clientset

	BeforeEach(func() {
		client = fake.NewClientset(secret("existing"))
	})

	It("CreateIfAbsent takes an existing object as success without reading it", func() {
		secrets := client.CoreV1().Secrets("ns")
		_, created, err := kube.CreateIfAbsent(context.Background(), secrets, secret("existing"))
		Expect(err).NotTo(HaveOccurred())
		Expect(created).To(BeFalse())
		got, created, err := kube.CreateIfAbsent(context.Background(), secrets, secret("new"))
		Expect(err).NotTo(HaveOccurred())
		Expect(created).To(BeTrue())
		Expect(got.Name).To(Equal("new"))
		Expect(verbs(client)).To(Equal([]string{"create", "create"}))
	})

	It("CreateOrGet returns the existing object from the cache when it has it", func() {
		cached := func(name string) (*corev1.Secret, bool) { return secret(name), name == "existing" }
		got, created, err := kube.CreateOrGet(context.Background(), client.CoreV1().Secrets("ns"), secret("existing"), cached)
		Expect(err).NotTo(HaveOccurred())
		Expect(created).To(BeFalse())
		Expect(got.Name).To(Equal("existing"))
		Expect(verbs(client)).To(Equal([]string{"create"}))
	})

	It("CreateOrGet reads the existing object from the API otherwise", func() {
		got, created, err := kube.CreateOrGet(context.Background(), client.CoreV1().Secrets("ns"), secret("existing"), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(created).To(BeFalse())
		Expect(got.Name).To(Equal("existing"))
		Expect(verbs(client)).To(Equal([]string{"create", "get"}))
	})

	It("passes other errors on", func() {
		client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewServiceUnavailable("down")
		})
		_, _, err := kube.CreateOrGet(context.Background(), client.CoreV1().Secrets("ns"), secret("x"), nil)
		Expect(apierrors.IsServiceUnavailable(err)).To(BeTrue())
	})
})

var _ = Describe("SetOwner", func() {
	It("makes the reference the only owner", func() {
		stale := secret("s")
		stale.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: "old"}}
		client := fake.NewClientset(stale)
		owner := &metav1.ObjectMeta{Name: "d", UID: "new"}
		ref := kube.ControllerRef(owner, "apps/v1", "Deployment")
		Expect(*ref.Controller).To(BeTrue())
		Expect(*ref.BlockOwnerDeletion).To(BeTrue())

		got, err := kube.SetOwner(context.Background(), client.CoreV1().Secrets("ns"), "s", "", ref)
		Expect(err).NotTo(HaveOccurred())
		Expect(got.OwnerReferences).To(Equal([]metav1.OwnerReference{ref}))
		Expect(verbs(client)).To(Equal([]string{"patch"}))
	})
})
