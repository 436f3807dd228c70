package bifrost_test

import (
	"context"
	"errors"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("LRP bifrost", func() {
	var (
		backend *fakes.FakeLRPBackend
		b       *bifrost.LRP
		ctx     context.Context
		id      opi.LRPIdentifier
	)

	BeforeEach(func() {
		backend = new(fakes.FakeLRPBackend)
		b = &bifrost.LRP{Backend: backend}
		ctx = context.Background()
		id = opi.LRPIdentifier{GUID: guid, Version: version}
	})

	Describe("Desire", func() {
		It("hands the converted LRP to the backend", func() {
			Expect(b.Desire(ctx, decode(desireBody()))).To(Succeed())
			Expect(backend.DesireLRPCallCount()).To(Equal(1))
			_, lrp := backend.DesireLRPArgsForCall(0)
			Expect(lrp.ProcessGUID()).To(Equal(guid + "-" + version))
			Expect(lrp.Instances).To(BeEquivalentTo(3))
		})

		It("does not call the backend for an invalid request", func() {
			err := b.Desire(ctx, with(func(m map[string]any) { m["memory_mb"] = -5 }))
			Expect(errors.Is(err, opi.ErrInvalid)).To(BeTrue())
			Expect(backend.DesireLRPCallCount()).To(BeZero())
		})

		It("passes backend errors on, still recognisable", func() {
			backend.DesireLRPReturns(fmt.Errorf("boom: %w", opi.ErrUnavailable))
			err := b.Desire(ctx, decode(desireBody()))
			Expect(errors.Is(err, opi.ErrUnavailable)).To(BeTrue())
		})
	})

	Describe("List", func() {
		It("returns an empty, non-nil list when nothing runs", func() {
			infos, err := b.List(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(infos).NotTo(BeNil())
			Expect(infos).To(BeEmpty())
		})

		It("renders one scheduling info per LRP", func() {
			backend.ListLRPsReturns([]*opi.LRP{
				{LRPIdentifier: id, AppGUID: "a", Instances: 2, LastUpdated: "2.0"},
				{LRPIdentifier: opi.LRPIdentifier{GUID: "g2", Version: "v2"}, LastUpdated: "3.0"},
			}, nil)
			infos, err := b.List(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(infos).To(HaveLen(2))
			Expect(infos[0].DesiredLRPKey.ProcessGUID).To(Equal(id.ProcessGUID()))
			Expect(infos[0].Annotation).To(Equal("2.0"))
			Expect(infos[1].DesiredLRPKey.ProcessGUID).To(Equal("g2-v2"))
		})
	})

	Describe("Get", func() {
		It("returns the desired lrp", func() {
			backend.GetLRPReturns(&opi.LRP{LRPIdentifier: id, Image: "busybox", LastUpdated: "1.5"}, nil)
			d, err := b.Get(ctx, id)
			Expect(err).NotTo(HaveOccurred())
			Expect(d.Image).To(Equal("busybox"))
			Expect(d.Annotation).To(Equal("1.5"))
			_, asked := backend.GetLRPArgsForCall(0)
			Expect(asked).To(Equal(id))
		})

		It("passes not-found on", func() {
			backend.GetLRPReturns(nil, opi.ErrNotFound)
			_, err := b.Get(ctx, id)
			Expect(errors.Is(err, opi.ErrNotFound)).To(BeTrue())
		})
	})

	Describe("Update", func() {
		It("converts and applies the update", func() {
			four := 4
			Expect(b.Update(ctx, models.UpdateDesiredLRPRequest{GUID: guid, Version: version, Update: &models.LRPUpdate{Instances: &four}})).To(Succeed())
			_, gotID, u := backend.UpdateLRPArgsForCall(0)
			Expect(gotID).To(Equal(id))
			Expect(*u.Instances).To(BeEquivalentTo(4))
		})

		It("rejects an invalid update without calling the backend", func() {
			Expect(b.Update(ctx, models.UpdateDesiredLRPRequest{GUID: guid, Version: version})).NotTo(Succeed())
			Expect(backend.UpdateLRPCallCount()).To(BeZero())
		})
	})

	Describe("StopInstance", func() {
		It("stops the named index", func() {
			Expect(b.StopInstance(ctx, id, 2)).To(Succeed())
			_, gotID, index := backend.StopInstanceArgsForCall(0)
			Expect(gotID).To(Equal(id))
			Expect(index).To(BeEquivalentTo(2))
		})

		It("rejects a negative index", func() {
			Expect(errors.Is(b.StopInstance(ctx, id, -1), opi.ErrInvalid)).To(BeTrue())
			Expect(backend.StopInstanceCallCount()).To(BeZero())
		})
	})

	Describe("Stop", func() {
		It("stops the LRP", func() {
			Expect(b.Stop(ctx, id)).To(Succeed())
			_, gotID := backend.StopLRPArgsForCall(0)
			Expect(gotID).To(Equal(id))
		})
	})

	Describe("Instances", func() {
		It("renders instances in Diego's terms", func() {
			backend.GetInstancesReturns([]*opi.Instance{
				{Index: 0, State: opi.InstanceRunning, Since: 123},
				{Index: 1, State: opi.InstanceUnclaimed, PlacementError: "Insufficient resources: memory"},
				{Index: 2, State: opi.InstanceCrashed, Since: 456, CrashReason: "Failed to pull the image: not found"},
			}, nil)
			instances, err := b.Instances(ctx, id)
			Expect(err).NotTo(HaveOccurred())
			Expect(instances).To(Equal([]models.Instance{
				{Index: 0, State: "RUNNING", Since: 123},
				{Index: 1, State: "UNCLAIMED", PlacementError: "Insufficient resources: memory"},
				// CC shows only placement_error (as details): the crash reason goes there too.
				{Index: 2, State: "CRASHED", Since: 456, PlacementError: "Failed to pull the image: not found", CrashReason: "Failed to pull the image: not found"},
			}))
		})

		It("returns a non-nil empty list for no instances", func() {
			instances, err := b.Instances(ctx, id)
			Expect(err).NotTo(HaveOccurred())
			Expect(instances).NotTo(BeNil())
		})
	})
})
