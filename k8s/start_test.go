package k8s_test

import (
	"context"
	"sync/atomic"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("Start past its cache-sync timeout", func() {
	var (
		client  *fake.Clientset
		logger  *lagertest.TestLogger
		backend *k8s.Backend
		started chan error
		// refusing makes every LIST of the resource fail with refusal while set.
		refusing atomic.Bool
		refusal  error
	)
	var resource string
	opts := k8s.Options{Namespace: backendtest.Namespace, CacheSyncTimeout: time.Nanosecond}

	BeforeEach(func() {
		client = backendtest.NewClient()
		logger = lagertest.NewTestLogger("k8s")
		refusing.Store(true)
		resource = "deployments"
		// The API server gives up on a LIST it could not finish in time: from the
		// informer's side, a sync that does not complete.
		refusal = apierrors.NewServerTimeout(schema.GroupResource{Group: "apps", Resource: "deployments"}, "list", 1)
	})

	JustBeforeEach(func() {
		client.PrependReactor("list", resource, func(k8stesting.Action) (bool, runtime.Object, error) {
			if refusing.Load() {
				return true, nil, refusal
			}
			return false, nil, nil
		})
		backend = backendtest.MustBackend(client, logger, opts)
		backend.SetSyncPatience(10*time.Millisecond, time.Millisecond)
		ctx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		started = make(chan error, 1)
		go func() { started <- backend.Start(ctx) }()
	})

	It("keeps waiting, logging cache-sync-slow, answers unavailable meanwhile, and serves once synced", func() {
		ctx := context.Background()
		Eventually(logger).Should(gbytes.Say(`cache-sync-slow.*deployments`))
		// A second check came and went: Start did not give up at the first.
		Eventually(logger).Should(gbytes.Say(`cache-sync-slow`))
		Expect(started).NotTo(Receive())
		_, err := backend.ListLRPs(ctx)
		Expect(err).To(MatchError(opi.ErrUnavailable))
		Expect(backend.Ready(ctx)).To(MatchError(opi.ErrUnavailable))

		refusing.Store(false)
		Eventually(started, time.Minute).Should(Receive(BeNil()))
		Expect(backend.Ready(ctx)).To(Succeed())
		_, err = backend.ListLRPs(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(logger).To(gbytes.Say(`caches-synced`))
	})

	Context("when opi may not list what it caches", func() {
		BeforeEach(func() {
			resource = "pods"
			refusal = apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", nil)
		})

		It("stops, saying which permission to grant", func() {
			var err error
			Eventually(started, time.Minute).Should(Receive(&err))
			Expect(err).To(MatchError(ContainSubstring(`list pods in namespace "` + backendtest.Namespace + `": not allowed`)))
			Expect(err).To(MatchError(ContainSubstring("list and watch on pods")))
			Expect(apierrors.IsForbidden(err)).To(BeTrue())
			Expect(backend.Ready(context.Background())).To(MatchError(opi.ErrUnavailable))
		})
	})
})

var _ = Describe("Start's hooks", func() {
	It("retry their namespace-wide objects while the API server is unavailable", func() {
		client := backendtest.NewClient()
		var failures atomic.Int32
		client.PrependReactor("create", "networkpolicies", func(k8stesting.Action) (bool, runtime.Object, error) {
			if failures.Add(1) <= 2 {
				return true, nil, backendtest.ConnectionRefused
			}
			return false, nil, nil
		})
		logger := lagertest.NewTestLogger("k8s")
		backend := backendtest.MustBackend(client, logger, k8s.Options{
			Namespace: backendtest.Namespace,
			Hooks:     hooks.Options{NetworkPolicy: hooks.NetworkPolicyOptions{Enabled: true, DNSNamespace: "kube-system"}},
		})
		backend.SetSyncPatience(time.Millisecond, time.Millisecond)
		ctx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		Expect(backend.Start(ctx)).To(Succeed())
		Expect(logger).To(gbytes.Say(`hook-start-retrying`))
		_, err := client.NetworkingV1().NetworkPolicies(backendtest.Namespace).Get(ctx, hooks.BaselinePolicyName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
	})

	It("stop start-up on an error that waiting does not mend", func() {
		client := backendtest.NewClient()
		client.PrependReactor("create", "networkpolicies", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "networking.k8s.io", Resource: "networkpolicies"}, "", nil)
		})
		backend := backendtest.MustBackend(client, lagertest.NewTestLogger("k8s"), k8s.Options{
			Namespace: backendtest.Namespace,
			Hooks:     hooks.Options{NetworkPolicy: hooks.NetworkPolicyOptions{Enabled: true, DNSNamespace: "kube-system"}},
		})
		backend.SetSyncPatience(time.Millisecond, time.Millisecond)
		ctx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		err := backend.Start(ctx)
		Expect(apierrors.IsForbidden(err)).To(BeTrue())
		Expect(err).To(MatchError(ContainSubstring("start network-policy")))
	})
})
