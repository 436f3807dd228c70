package lrp_test

import (
	"context"
	"errors"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/lrp"
	"github.com/opi-bridge/opi/k8s/internal/lrp/lrpfakes"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/internal/workload"
	"github.com/opi-bridge/opi/opi"
)

// The service on its own: what it reads comes from a fake of its Cache interface, what it writes
// goes to a fake clientset, so each spec shows what the service does with what the cache says.
var _ = Describe("LRP service", func() {
	const namespace = "apps"
	var (
		ctx     context.Context
		client  *fake.Clientset
		cache   *lrpfakes.FakeCache
		service *lrp.Service
		id      opi.LRPIdentifier
	)

	BeforeEach(func() {
		ctx = context.Background()
		client = fake.NewClientset()
		cache = &lrpfakes.FakeCache{}
		id = opi.LRPIdentifier{GUID: "guid-1", Version: "v1"}
		kind := workload.New(workload.Deployments, workload.Config{Apps: client.AppsV1(), Namespace: namespace,
			Cached: func(string) (metav1.ObjectMeta, int32, bool) { return metav1.ObjectMeta{}, 0, false }})
		var err error
		service, err = lrp.New(lagertest.NewTestLogger("lrp"), lrp.Config{Namespace: namespace}, lrp.Deps{
			Client: client, Kind: kind, Cache: cache,
			Lists: hooks.NewMetadataLists(nil, client, nil, namespace),
		})
		Expect(err).NotTo(HaveOccurred())
	})

	It("refuses to be made without its dependencies", func() {
		_, err := lrp.New(lagertest.NewTestLogger("lrp"), lrp.Config{Namespace: namespace}, lrp.Deps{Client: client})
		Expect(err).To(MatchError(ContainSubstring("needs a client, a workload kind, a cache")))
	})

	It("writes nothing while the cache is not writable", func() {
		cache.CheckWritableReturns(opi.ErrUnavailable)
		lrpToDesire := &opi.LRP{LRPIdentifier: id, AppGUID: "app", Image: "busybox", Instances: 1}
		Expect(service.DesireLRP(ctx, lrpToDesire)).To(MatchError(opi.ErrUnavailable))
		instances := int32(2)
		Expect(service.UpdateLRP(ctx, id, opi.LRPUpdate{Instances: &instances})).To(MatchError(opi.ErrUnavailable))
		Expect(service.StopLRP(ctx, id)).To(MatchError(opi.ErrUnavailable))
		Expect(service.StopInstance(ctx, id, 0)).To(MatchError(opi.ErrUnavailable))
		Expect(client.Actions()).To(BeEmpty())
		Expect(cache.FindWorkloadCallCount()).To(BeZero(), "not even a look-up")
	})

	It("answers reads from the cache alone", func() {
		_, err := service.GetLRP(ctx, id)
		Expect(err).To(MatchError(opi.ErrNotFound))

		record := &store.WorkloadRecord{ObjectMeta: metav1.ObjectMeta{Name: "app-1", UID: "u1", Generation: 3},
			LRPRef: store.LRPRef{GUID: id.GUID, Version: id.Version}, AppGUID: "app", ReplicaCount: 3, Image: "busybox"}
		cache.WorkloadReturns(record)
		got, err := service.GetLRP(ctx, id)
		Expect(err).NotTo(HaveOccurred())
		Expect(got.LRPIdentifier).To(Equal(id))
		Expect(got.Instances).To(Equal(int32(3)))
		Expect(got.ModificationTag).To(Equal(opi.ModificationTag{Epoch: "u1", Index: 3}))

		// Instance i is the pod at position i; a position without a pod reports nothing.
		cache.InstancesReturns([]*store.PodRecord{
			{ObjectMeta: metav1.ObjectMeta{Name: "p0"}, State: opi.InstanceRunning, Since: 7},
			nil,
			{ObjectMeta: metav1.ObjectMeta{Name: "p2"}, State: opi.InstanceCrashed, CrashReason: "APP/PROC/WEB: Exited with status 1"},
		})
		instances, err := service.GetInstances(ctx, id)
		Expect(err).NotTo(HaveOccurred())
		Expect(instances).To(Equal([]*opi.Instance{
			{Index: 0, State: opi.InstanceRunning, Since: 7},
			{Index: 2, State: opi.InstanceCrashed, CrashReason: "APP/PROC/WEB: Exited with status 1"},
		}))
		Expect(cache.InstancesArgsForCall(0)).To(BeIdenticalTo(record))
		Expect(client.Actions()).To(BeEmpty())
	})

	It("refuses an instance index outside the cached workload's count and deletes nothing", func() {
		cache.WorkloadReturns(&store.WorkloadRecord{ObjectMeta: metav1.ObjectMeta{Name: "app-1"},
			LRPRef: store.LRPRef{GUID: id.GUID, Version: id.Version}, ReplicaCount: 2})
		err := service.StopInstance(ctx, id, 2)
		Expect(err).To(MatchError(opi.ErrInvalid))
		Expect(err.Error()).To(ContainSubstring("out of range 0..1"))
		Expect(service.StopInstance(ctx, id, -1)).To(MatchError(opi.ErrInvalid))
		Expect(client.Actions()).To(BeEmpty())
	})

	It("lists what the cache holds in guid and version order, versioned by the cache's changes", func() {
		cache.WorkloadChangesReturns(42)
		cache.WorkloadsReturns([]*store.WorkloadRecord{
			{LRPRef: store.LRPRef{GUID: "b", Version: "1"}},
			{LRPRef: store.LRPRef{GUID: "a", Version: "2"}},
			{LRPRef: store.LRPRef{GUID: "a", Version: "1"}},
			{LRPRef: store.LRPRef{GUID: "gone", Version: "1"}, ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "not-opis"}},
		})
		lrps, version, err := service.ListLRPsVersioned(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(version).To(Equal(uint64(42)))
		var ids []opi.LRPIdentifier
		for _, l := range lrps {
			ids = append(ids, l.LRPIdentifier)
		}
		Expect(ids).To(Equal([]opi.LRPIdentifier{{GUID: "a", Version: "1"}, {GUID: "a", Version: "2"}, {GUID: "b", Version: "1"}}))
	})

	// An undo waits for the cache to lose the workload only when it deleted it: the cache would
	// show a workload whose delete failed until the undo's timeout, and the refusal would wait
	// that long for nothing.
	DescribeTable("a desire refused after its workload was created waits for the cache to lose the workload only when the undo deleted it",
		func(deleteErr error, waits int) {
			client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "x", errors.New("exceeded quota"))
			})
			if deleteErr != nil {
				client.PrependReactor("delete", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, deleteErr
				})
			}
			err := service.DesireLRP(ctx, &opi.LRP{LRPIdentifier: id, AppGUID: "app", Image: "busybox", Instances: 1})
			Expect(err).To(MatchError(opi.ErrInvalid))
			Expect(err.Error()).To(ContainSubstring("exceeded quota"))
			Expect(cache.WaitForWorkloadGoneCallCount()).To(Equal(waits))
			if waits > 0 {
				created := ""
				for _, a := range client.Actions() {
					if c, ok := a.(k8stesting.CreateAction); ok && a.GetResource().Resource == "deployments" {
						created = c.GetObject().(metav1.Object).GetName()
					}
				}
				_, _, name, _ := cache.WaitForWorkloadGoneArgsForCall(0)
				Expect(name).NotTo(BeEmpty())
				Expect(name).To(Equal(created), "the workload waited for is the one this desire created")
			}
		},
		Entry("deleted: waits once", nil, 1),
		Entry("the delete failed: does not wait", apierrors.NewInternalError(errors.New("etcd is down")), 0),
		Entry("already gone: waits once", apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, "x"), 1),
	)
})
