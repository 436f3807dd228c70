package handler_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/handler"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

// versionedLRPBifrost is an LRP bifrost with a list version.
type versionedLRPBifrost struct {
	*fakes.FakeLRPBifrost
	*fakes.FakeVersionedLRPLister
}

// versionedTaskBifrost is a task bifrost with a list version.
type versionedTaskBifrost struct {
	*fakes.FakeTaskBifrost
	*fakes.FakeVersionedTaskLister
}

// get answers GET path on router: status, Content-Length header and body.
func get(router http.Handler, path string) (int, string, string) {
	w := httptest.NewRecorder()
	router.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	Expect(w.Header().Get("Content-Type")).To(Equal("application/json"))
	body, err := io.ReadAll(w.Result().Body)
	Expect(err).NotTo(HaveOccurred())
	return w.Code, w.Header().Get("Content-Length"), string(body)
}

func schedulingInfos(n int) []models.DesiredLRPSchedulingInfo {
	infos := make([]models.DesiredLRPSchedulingInfo, n)
	for i := range infos {
		infos[i] = models.DesiredLRPSchedulingInfo{
			DesiredLRPKey:      models.DesiredLRPKey{ProcessGUID: fmt.Sprintf("%s-%d", processGUID, i), Domain: "cf-apps", LogGUID: "app"},
			Annotation:         `quote " and <tag> & ` + strconv.Itoa(i),
			Instances:          int32(i),
			DesiredLRPResource: models.DesiredLRPResource{MemoryMB: 256, DiskMB: 1024},
			ModificationTag:    models.ModificationTag{Epoch: "e", Index: int64(i)},
			GUID:               guid, Version: version,
		}
	}
	return infos
}

var _ = Describe("GET /apps encoded once per list version", func() {
	var (
		plain     *fakes.FakeLRPBifrost
		versioned versionedLRPBifrost
		perCall   http.Handler // today's encoding, per call
		cached    http.Handler
	)

	BeforeEach(func() {
		logger := lagertest.NewTestLogger("handler")
		plain = new(fakes.FakeLRPBifrost)
		versioned = versionedLRPBifrost{new(fakes.FakeLRPBifrost), new(fakes.FakeVersionedLRPLister)}
		perCall = handler.New(handler.Config{LRP: plain, Logger: logger})
		cached = handler.New(handler.Config{LRP: versioned, Logger: logger})
	})

	// serve has both bifrosts list infos, the versioned one at version.
	serve := func(infos []models.DesiredLRPSchedulingInfo, version uint64) {
		plain.ListReturns(infos, nil)
		versioned.ListVersionReturns(version, true, nil)
		versioned.ListVersionedReturns(infos, version, nil)
	}

	DescribeTable("serves the bytes the per-call encoding writes",
		func(n int) {
			serve(schedulingInfos(n), 7)
			status, _, want := get(perCall, "/apps")
			Expect(status).To(Equal(http.StatusOK))
			status, length, body := get(cached, "/apps")
			Expect(status).To(Equal(http.StatusOK))
			Expect(body).To(Equal(want))
			Expect(length).To(Equal(strconv.Itoa(len(want))))
		},
		Entry("no LRPs: an empty list, never null", 0),
		Entry("one LRP", 1),
		Entry("more than a write buffer's worth", 500),
	)

	It("encodes once per version and again when the version grows", func() {
		serve(schedulingInfos(3), 1)
		_, _, first := get(cached, "/apps")
		_, _, again := get(cached, "/apps")
		Expect(again).To(Equal(first))
		Expect(versioned.ListVersionedCallCount()).To(Equal(1))
		Expect(versioned.ListCallCount()).To(Equal(0))

		serve(schedulingInfos(4), 2)
		_, _, changed := get(cached, "/apps")
		Expect(changed).NotTo(Equal(first))
		Expect(changed).To(ContainSubstring(processGUID + "-3"))
		Expect(versioned.ListVersionedCallCount()).To(Equal(2))
	})

	It("keys the body on the version of the list it encoded, not the one read before", func() {
		// The list moved on (to version 5) between the version read and the encode: the body
		// is of version 5, so a call that reads 5 does not encode again.
		versioned.ListVersionReturns(3, true, nil)
		versioned.ListVersionedReturns(schedulingInfos(5), 5, nil)
		get(cached, "/apps")
		versioned.ListVersionReturns(5, true, nil)
		get(cached, "/apps")
		Expect(versioned.ListVersionedCallCount()).To(Equal(1))
		versioned.ListVersionReturns(6, true, nil)
		get(cached, "/apps")
		Expect(versioned.ListVersionedCallCount()).To(Equal(2))
	})

	It("shares one encode among concurrent calls of the same version", func() {
		const callers = 8
		versioned.ListVersionReturns(1, true, nil)
		versioned.ListVersionedStub = func(context.Context) ([]models.DesiredLRPSchedulingInfo, uint64, error) {
			// Hold the encode until every caller has read the version, so that they all
			// find it in flight or done.
			for versioned.ListVersionCallCount() < callers {
				runtime.Gosched()
			}
			return schedulingInfos(100), 1, nil
		}
		bodies := make([]string, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				defer GinkgoRecover()
				_, _, bodies[i] = get(cached, "/apps")
			})
		}
		wg.Wait()
		Expect(versioned.ListVersionedCallCount()).To(Equal(1))
		for _, b := range bodies {
			Expect(b).To(Equal(bodies[0]))
		}
		Expect(bodies[0]).To(ContainSubstring(processGUID + "-99"))
	})

	It("encodes per call when the bifrost has no version after all", func() {
		versioned.ListVersionReturns(0, false, nil)
		versioned.FakeLRPBifrost.ListReturns(schedulingInfos(2), nil)
		plain.ListReturns(schedulingInfos(2), nil)
		_, _, want := get(perCall, "/apps")
		_, _, body := get(cached, "/apps")
		Expect(body).To(Equal(want))
		Expect(versioned.FakeLRPBifrost.ListCallCount()).To(Equal(1))
		Expect(versioned.ListVersionedCallCount()).To(Equal(0))
	})

	It("answers the contract's error when the version or the list cannot be read", func() {
		versioned.ListVersionReturns(0, false, fmt.Errorf("list: %w", opi.ErrUnavailable))
		status, _, body := get(cached, "/apps")
		Expect(status).To(Equal(http.StatusServiceUnavailable))
		Expect(body).To(MatchJSON(`{"error":{"message":"list: orchestrator unavailable"}}`))

		versioned.ListVersionReturns(1, true, nil)
		versioned.ListVersionedReturns(nil, 0, fmt.Errorf("list: %w", opi.ErrUnavailable))
		status, _, body = get(cached, "/apps")
		Expect(status).To(Equal(http.StatusServiceUnavailable))
		Expect(body).To(MatchJSON(`{"error":{"message":"list: orchestrator unavailable"}}`))

		// A failed encode is not kept: the next call of that version encodes.
		versioned.ListVersionedReturns(schedulingInfos(1), 1, nil)
		status, _, _ = get(cached, "/apps")
		Expect(status).To(Equal(http.StatusOK))
	})
})

var _ = Describe("GET /tasks encoded once per list version", func() {
	var (
		plain     *fakes.FakeTaskBifrost
		versioned versionedTaskBifrost
		perCall   http.Handler
		cached    http.Handler
	)

	BeforeEach(func() {
		logger := lagertest.NewTestLogger("handler")
		plain = new(fakes.FakeTaskBifrost)
		versioned = versionedTaskBifrost{new(fakes.FakeTaskBifrost), new(fakes.FakeVersionedTaskLister)}
		perCall = handler.New(handler.Config{LRP: new(fakes.FakeLRPBifrost), Task: plain, Logger: logger})
		cached = handler.New(handler.Config{LRP: new(fakes.FakeLRPBifrost), Task: versioned, Logger: logger})
	})

	tasks := func(n int) []models.TaskResponse {
		out := make([]models.TaskResponse, n)
		for i := range out {
			out[i] = models.TaskResponse{GUID: fmt.Sprintf("task-%d", i), Name: "<migrate> & co", State: "COMPLETED", Failed: i%2 == 0, FailureReason: "Error (exit code 3)"}
		}
		return out
	}

	DescribeTable("serves the bytes the per-call encoding writes",
		func(list []models.TaskResponse) {
			plain.ListReturns(list, nil)
			versioned.ListVersionReturns(4, true, nil)
			versioned.ListVersionedReturns(list, 4, nil)
			_, _, want := get(perCall, "/tasks")
			status, length, body := get(cached, "/tasks")
			Expect(status).To(Equal(http.StatusOK))
			Expect(body).To(Equal(want))
			Expect(length).To(Equal(strconv.Itoa(len(want))))
		},
		Entry("no tasks: [], never null", nil),
		Entry("empty", []models.TaskResponse{}),
		Entry("many", tasks(300)),
	)

	It("encodes once per version and again when the version grows", func() {
		versioned.ListVersionReturns(1, true, nil)
		versioned.ListVersionedReturns(tasks(1), 1, nil)
		_, _, first := get(cached, "/tasks")
		get(cached, "/tasks")
		Expect(versioned.ListVersionedCallCount()).To(Equal(1))
		versioned.ListVersionReturns(2, true, nil)
		versioned.ListVersionedReturns(tasks(2), 2, nil)
		_, _, second := get(cached, "/tasks")
		Expect(second).NotTo(Equal(first))
		Expect(second).To(ContainSubstring("task-1"))
		Expect(versioned.ListVersionedCallCount()).To(Equal(2))
	})

	It("answers the task routes' error body when the list cannot be read", func() {
		versioned.ListVersionReturns(0, false, fmt.Errorf("list tasks: %w", opi.ErrUnavailable))
		status, _, body := get(cached, "/tasks")
		Expect(status).To(Equal(http.StatusServiceUnavailable))
		Expect(body).To(MatchJSON(`{"message":"list tasks: orchestrator unavailable"}`))
	})
})
