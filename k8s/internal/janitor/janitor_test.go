package janitor_test

import (
	"context"
	"fmt"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/janitor"
	"github.com/opi-bridge/opi/k8s/internal/janitor/janitorfakes"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/internal/workload"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// missingHook is a hook with a Missing: it names every workload it is given and records the
// targets the janitor completes.
type missingHook struct{ targets []hooks.Target }

func (h *missingHook) Name() string { return "fake" }
func (h *missingHook) Missing(_ context.Context, ws []hooks.Workload) ([]hooks.Workload, error) {
	return ws, nil
}
func (h *missingHook) Desired(_ context.Context, t hooks.Target) error {
	h.targets = append(h.targets, t)
	return nil
}

// The janitor on its own: a fake of its cache (janitor.Cache), client-go's fake clientset and
// metadata LISTs served from it. The specs through the backend (backend_test.go,
// janitor_incomplete_test.go, k8s/internal/hooks/backend_test.go) prove the wiring and every leftover.
var _ = Describe("Janitor", func() {
	const namespace = "apps"
	var (
		ctx    context.Context
		client *fake.Clientset
		cache  *janitorfakes.FakeCache
		hook   *missingHook
		lists  []string
		deps   janitor.Deps
	)
	id := opi.LRPIdentifier{GUID: "guid-1", Version: "v1"}
	labels := map[string]string{names.LabelGUID: id.GUID, names.LabelVersion: id.Version, names.LabelSourceType: names.SourceTypeApp}
	old := metav1.NewTime(time.Now().Add(-time.Hour))

	// metadataLists are the hooks' LISTs over the fake clientset, recording the resources listed.
	metadataLists := func(resource schema.GroupVersionResource) hooks.MetadataList {
		lists = append(lists, resource.Resource)
		return hooks.NewMetadataLists(nil, client, nil, namespace)(resource)
	}
	newJanitor := func() *janitor.Janitor {
		j, err := janitor.New(lagertest.NewTestLogger("janitor"), janitor.Config{Namespace: namespace, Options: janitor.Options{Grace: time.Minute}}, deps)
		Expect(err).NotTo(HaveOccurred())
		return j
	}
	deployment := func(name string) *appsv1.Deployment {
		d, err := client.AppsV1().Deployments(namespace).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: namespace, UID: "uid-d", Labels: labels, CreationTimestamp: old,
		}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		return d
	}
	recordOf := func(d *appsv1.Deployment) *store.WorkloadRecord {
		return store.WorkloadRecordOf(&d.ObjectMeta, d.Spec.Replicas, &d.Spec.Template)
	}

	BeforeEach(func() {
		ctx = context.Background()
		client = fake.NewClientset()
		cache = new(janitorfakes.FakeCache)
		cache.FindWorkloadReturns(nil, store.NotFound(id))
		hook = &missingHook{}
		lists = nil
		deps = janitor.Deps{
			Client: client,
			Kind:   workload.New(workload.Deployments, workload.Config{Apps: client.AppsV1(), Namespace: namespace}),
			Cache:  cache,
			Hooks:  hooks.Set{hooks.Off("off"), hook},
			Lists:  metadataLists,
		}
	})

	It("sweeps nothing while the cache is not writable: no LIST, no write", func() {
		cache.CheckWatchingReturns(fmt.Errorf("caches not synced yet: %w", opi.ErrUnavailable))
		_, err := client.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Name: "leftover-env", Namespace: namespace, Labels: labels, CreationTimestamp: old,
		}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		client.ClearActions()

		newJanitor().Sweep(ctx)

		Expect(client.Actions()).To(BeEmpty())
		Expect(lists).To(BeEmpty())
		Expect(cache.WorkloadsCallCount()).To(BeZero())
		Expect(cache.FindWorkloadCallCount()).To(BeZero())
	})

	It("deletes an unowned Secret and Service older than the grace whose LRP the cache and the API lack, and keeps younger ones", func() {
		young := metav1.NewTime(time.Now())
		for name, created := range map[string]metav1.Time{"old": old, "young": young} {
			meta := metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels, CreationTimestamp: created}
			_, err := client.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{ObjectMeta: meta}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			_, err = client.CoreV1().Services(namespace).Create(ctx, &corev1.Service{ObjectMeta: meta}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}

		newJanitor().Sweep(ctx)

		Expect(lists).To(Equal([]string{"secrets", "services"}))
		Expect(cache.FindWorkloadCallCount()).To(Equal(4))
		_, found := cache.FindWorkloadArgsForCall(0)
		Expect(found).To(Equal(id))
		secrets, err := client.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(secrets.Items).To(ConsistOf(HaveField("Name", "young")))
		services, err := client.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(services.Items).To(ConsistOf(HaveField("Name", "young")))
	})

	It("deletes a cached workload older than the grace whose env Secret is missing, and completes nothing of it", func() {
		d := deployment("app-a")
		cache.WorkloadsReturns([]*store.WorkloadRecord{recordOf(d)})

		newJanitor().Sweep(ctx)

		_, err := client.AppsV1().Deployments(namespace).Get(ctx, "app-a", metav1.GetOptions{})
		Expect(err).To(MatchError(ContainSubstring("not found")))
		Expect(hook.targets).To(BeEmpty())
	})

	It("has each hook with a Missing complete a cached workload older than the grace, with the workload as owner", func() {
		d := deployment("app-a")
		_, err := client.CoreV1().Secrets(namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Name: names.EnvSecretName("app-a"), Namespace: namespace, Labels: labels, CreationTimestamp: old,
			OwnerReferences: []metav1.OwnerReference{deps.Kind.ControllerRef(d)},
		}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		cache.WorkloadsReturns([]*store.WorkloadRecord{recordOf(d)})

		newJanitor().Sweep(ctx)

		Expect(hook.targets).To(HaveLen(1))
		t := hook.targets[0]
		Expect(t.Name).To(Equal("app-a"))
		Expect(t.Namespace).To(Equal(namespace))
		Expect(t.LRP.LRPIdentifier).To(Equal(id))
		Expect(t.Owner).To(Equal(deps.Kind.ControllerRef(d)))
		live, err := t.Live(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(live).To(BeTrue())
	})

	It("runs only with a period", func() {
		Expect(newJanitor().Runs()).To(BeFalse())
		j, err := janitor.New(lagertest.NewTestLogger("janitor"), janitor.Config{Namespace: namespace, Options: janitor.Options{Period: time.Minute}}, deps)
		Expect(err).NotTo(HaveOccurred())
		Expect(j.Runs()).To(BeTrue())
	})

	DescribeTable("New refuses a janitor missing a dependency",
		func(change func(*janitor.Deps), want string) {
			change(&deps)
			j, err := janitor.New(lagertest.NewTestLogger("janitor"), janitor.Config{Namespace: namespace, Options: janitor.Options{}}, deps)
			Expect(err).To(MatchError(want))
			Expect(j).To(BeNil())
		},
		Entry("the client", func(d *janitor.Deps) { d.Client = nil }, "janitor needs a kubernetes client"),
		Entry("the workload kind", func(d *janitor.Deps) { d.Kind = nil }, "janitor needs the workload kind"),
		Entry("the cache", func(d *janitor.Deps) { d.Cache = nil }, "janitor needs the cache"),
		Entry("the metadata lists", func(d *janitor.Deps) { d.Lists = nil }, "janitor needs the metadata lists"),
	)
})
