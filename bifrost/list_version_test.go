package bifrost_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("List versions", func() {
	ctx := context.Background()

	Describe("LRP", func() {
		It("has none when the backend keeps none", func() {
			b := &bifrost.LRP{Backend: new(fakes.FakeLRPBackend)}
			_, ok, err := b.ListVersion(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(ok).To(BeFalse())
			_, _, err = b.ListVersioned(ctx)
			Expect(err).To(HaveOccurred())
		})

		It("passes on the backend's version and list, converted", func() {
			backend := struct {
				*fakes.FakeLRPBackend
				*fakes.FakeLRPListVersioner
			}{new(fakes.FakeLRPBackend), new(fakes.FakeLRPListVersioner)}
			backend.LRPListVersionReturns(41, nil)
			backend.ListLRPsVersionedReturns([]*opi.LRP{{LRPIdentifier: opi.LRPIdentifier{GUID: guid, Version: version}, Instances: 2}}, 42, nil)
			b := &bifrost.LRP{Backend: backend}

			v, ok, err := b.ListVersion(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(ok).To(BeTrue())
			Expect(v).To(BeEquivalentTo(41))

			infos, v, err := b.ListVersioned(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(v).To(BeEquivalentTo(42))
			Expect(infos).To(HaveLen(1))
			Expect(infos[0].DesiredLRPKey.ProcessGUID).To(Equal(guid + "-" + version))

			backend.LRPListVersionReturns(0, fmt.Errorf("sync: %w", opi.ErrUnavailable))
			_, _, err = b.ListVersion(ctx)
			Expect(err).To(MatchError(opi.ErrUnavailable))
		})
	})

	Describe("Task", func() {
		It("has none when the backend keeps none", func() {
			t := &bifrost.Task{Backend: new(fakes.FakeTaskBackend)}
			_, ok, err := t.ListVersion(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(ok).To(BeFalse())
		})

		It("passes on the backend's version and list, converted", func() {
			backend := struct {
				*fakes.FakeTaskBackend
				*fakes.FakeTaskListVersioner
			}{new(fakes.FakeTaskBackend), new(fakes.FakeTaskListVersioner)}
			backend.TaskListVersionReturns(7, nil)
			backend.ListTasksVersionedReturns([]*opi.Task{{GUID: "t1", State: opi.TaskRunning}}, 8, nil)
			t := &bifrost.Task{Backend: backend}

			v, ok, err := t.ListVersion(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(ok).To(BeTrue())
			Expect(v).To(BeEquivalentTo(7))
			tasks, v, err := t.ListVersioned(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(v).To(BeEquivalentTo(8))
			Expect(tasks).To(HaveLen(1))
			Expect(tasks[0].GUID).To(Equal("t1"))
		})
	})
})
