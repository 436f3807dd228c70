package kube_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/internal/kube"
)

var _ = Describe("EnsureControlled", func() {
	var (
		ctx    = context.Background()
		owner  = kube.ControllerRef(&metav1.ObjectMeta{Name: "d", UID: "mine"}, "apps/v1", "Deployment")
		other  = kube.ControllerRef(&metav1.ObjectMeta{Name: "d", UID: "theirs"}, "apps/v1", "Deployment")
		live   bool
		checks int
		isLive = func(context.Context) (bool, error) { checks++; return live, nil }
	)
	BeforeEach(func() { live, checks = true, 0 })

	want := func() *corev1.Secret {
		s := secret("s")
		s.Data = map[string][]byte{"K": []byte("v")}
		return s
	}
	get := func(client *fake.Clientset) *corev1.Secret {
		s, err := client.CoreV1().Secrets("ns").Get(ctx, "s", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		return s
	}

	It("creates an absent object controlled by the owner", func() {
		client := fake.NewClientset()
		Expect(kube.EnsureControlled(ctx, client.CoreV1().Secrets("ns"), want(), nil, owner, isLive)).To(Succeed())
		Expect(verbs(client)).To(Equal([]string{"get", "create"}))
		Expect(get(client).OwnerReferences).To(Equal([]metav1.OwnerReference{owner}))
		Expect(get(client).Data).To(HaveKey("K"))
	})

	It("adopts an object without a controller with one patch conditional on the version seen", func() {
		seen := secret("s")
		seen.ResourceVersion = "7"
		client := fake.NewClientset(seen)
		var patch []byte
		client.PrependReactor("patch", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
			patch = a.(k8stesting.PatchAction).GetPatch()
			return false, nil, nil
		})
		Expect(kube.EnsureControlled(ctx, client.CoreV1().Secrets("ns"), want(), seen, owner, isLive)).To(Succeed())
		Expect(verbs(client)).To(Equal([]string{"patch"}))
		Expect(string(patch)).To(ContainSubstring(`"resourceVersion":"7"`))
		Expect(get(client).OwnerReferences).To(Equal([]metav1.OwnerReference{owner}))
		Expect(checks).To(BeZero())
	})

	It("does nothing to an object the owner already controls", func() {
		s := secret("s")
		s.OwnerReferences = []metav1.OwnerReference{owner}
		client := fake.NewClientset(s)
		Expect(kube.EnsureControlled(ctx, client.CoreV1().Secrets("ns"), want(), nil, owner, isLive)).To(Succeed())
		Expect(verbs(client)).To(Equal([]string{"get"}))
	})

	It("replaces an object of another controller while the owner is live, never moving it", func() {
		s := secret("s")
		s.UID = "old"
		s.OwnerReferences = []metav1.OwnerReference{other}
		client := fake.NewClientset(s)
		var preconditions *metav1.Preconditions
		client.PrependReactor("delete", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
			preconditions = a.(k8stesting.DeleteAction).GetDeleteOptions().Preconditions
			return false, nil, nil
		})
		Expect(kube.EnsureControlled(ctx, client.CoreV1().Secrets("ns"), want(), nil, owner, isLive)).To(Succeed())
		Expect(verbs(client)).To(Equal([]string{"get", "delete", "create"}))
		Expect(*preconditions.UID).To(BeEquivalentTo("old"))
		Expect(get(client).OwnerReferences).To(Equal([]metav1.OwnerReference{owner}))
		Expect(checks).To(Equal(1))
	})

	It("leaves an object of another controller alone once the owner is gone", func() {
		live = false
		s := secret("s")
		s.OwnerReferences = []metav1.OwnerReference{other}
		client := fake.NewClientset(s)
		err := kube.EnsureControlled(ctx, client.CoreV1().Secrets("ns"), want(), nil, owner, isLive)
		Expect(err).To(MatchError(kube.ErrSuperseded))
		Expect(verbs(client)).To(Equal([]string{"get"}))
		Expect(get(client).OwnerReferences).To(Equal([]metav1.OwnerReference{other}))
	})

	Describe("EnsureFreeOrControlled", func() {
		It("leaves an object without a controller as it is: one read, no patch, no liveness check", func() {
			client := fake.NewClientset(secret("s"))
			Expect(kube.EnsureFreeOrControlled(ctx, client.CoreV1().Secrets("ns"), want(), owner, isLive)).To(Succeed())
			Expect(verbs(client)).To(Equal([]string{"get"}))
			Expect(get(client).OwnerReferences).To(BeEmpty())
			Expect(checks).To(BeZero())
		})

		It("makes an object of another controller again, controlled by the live owner", func() {
			s := secret("s")
			s.OwnerReferences = []metav1.OwnerReference{other}
			client := fake.NewClientset(s)
			Expect(kube.EnsureFreeOrControlled(ctx, client.CoreV1().Secrets("ns"), want(), owner, isLive)).To(Succeed())
			Expect(verbs(client)).To(Equal([]string{"get", "delete", "create"}))
			Expect(get(client).OwnerReferences).To(Equal([]metav1.OwnerReference{owner}))
			Expect(get(client).Data).To(HaveKey("K"))
		})

		It("creates an object that is gone, controlled by the owner", func() {
			client := fake.NewClientset()
			Expect(kube.EnsureFreeOrControlled(ctx, client.CoreV1().Secrets("ns"), want(), owner, isLive)).To(Succeed())
			Expect(verbs(client)).To(Equal([]string{"get", "create"}))
			Expect(get(client).Data).To(HaveKey("K"))
		})
	})

	It("reads again after a conflict and gives up after a bounded number of turns", func() {
		client := fake.NewClientset(secret("s"))
		client.PrependReactor("patch", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewConflict(corev1.Resource("secrets"), "s", nil)
		})
		err := kube.EnsureControlled(ctx, client.CoreV1().Secrets("ns"), want(), nil, owner, isLive)
		Expect(err).To(MatchError(ContainSubstring("kept changing")))
		Expect(verbs(client)).To(Equal([]string{"get", "patch", "get", "patch", "get", "patch", "get", "patch", "get", "patch"}))
	})

	It("passes on an error of the liveness check", func() {
		s := secret("s")
		s.OwnerReferences = []metav1.OwnerReference{other}
		client := fake.NewClientset(s)
		boom := apierrors.NewServiceUnavailable("down")
		err := kube.EnsureControlled(ctx, client.CoreV1().Secrets("ns"), want(), nil, owner,
			func(context.Context) (bool, error) { return false, boom })
		Expect(err).To(MatchError(boom))
	})
})

var _ = Describe("EnsureOwned", func() {
	const namespace = "cf-workloads"
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "app", UID: types.UID("deployment-uid"), Controller: ptr.To(true)}
	live := func(context.Context) (bool, error) { return true, nil }
	service := func() *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: namespace}}
	}

	It("creates an absent object controlled by owner", func() {
		client := fake.NewClientset()
		_, created, err := kube.EnsureOwned(context.Background(), client.CoreV1().Services(namespace), service(), owner, live)
		Expect(err).NotTo(HaveOccurred())
		Expect(created).To(BeTrue())
		got, err := client.CoreV1().Services(namespace).Get(context.Background(), "app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.OwnerReferences).To(Equal([]metav1.OwnerReference{owner}))
	})

	It("makes an existing object without a controller controlled, its content left", func() {
		existing := service()
		existing.Spec.ClusterIP = "10.0.0.7"
		client := fake.NewClientset(existing)
		_, created, err := kube.EnsureOwned(context.Background(), client.CoreV1().Services(namespace), service(), owner, live)
		Expect(err).NotTo(HaveOccurred())
		Expect(created).To(BeFalse())
		got, err := client.CoreV1().Services(namespace).Get(context.Background(), "app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.OwnerReferences).To(Equal([]metav1.OwnerReference{owner}))
		Expect(got.Spec.ClusterIP).To(Equal("10.0.0.7"))
	})
})
