package lrp_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/handler"
	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// perCallLRP and perCallTask hide the bifrosts' list versions: a router on them encodes every
// list per call, as before list versions.
type perCallLRP struct{ handler.LRPBifrost }

type perCallTask struct{ handler.TaskBifrost }

var _ = Describe("GET /apps and GET /tasks served from encoded bodies", func() {
	var (
		ctx     context.Context
		client  *fake.Clientset
		backend *k8s.Backend
		cached  http.Handler // the list bodies encoded once per cache change
		perCall http.Handler // encoded on every call
	)

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		backend = backendtest.StartBackend(client)
		lrps := &bifrost.LRP{Backend: backend}
		tasks := &bifrost.Task{Backend: backend}
		logger := lagertest.NewTestLogger("handler")
		cached = handler.New(handler.Config{LRP: lrps, Task: tasks, Logger: logger})
		perCall = handler.New(handler.Config{LRP: perCallLRP{lrps}, Task: perCallTask{tasks}, Logger: logger})
	})

	get := func(router http.Handler, path string) string {
		GinkgoHelper()
		w := httptest.NewRecorder()
		router.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		Expect(w.Code).To(Equal(http.StatusOK))
		body, err := io.ReadAll(w.Result().Body)
		Expect(err).NotTo(HaveOccurred())
		return string(body)
	}

	lrpNumber := func(i int) *opi.LRP {
		lrp := backendtest.SampleLRP()
		lrp.GUID = fmt.Sprintf("%08d-0000-4000-8000-000000000000", i)
		return lrp
	}

	It("serves the bytes of the per-call encoding, for an empty cache too", func() {
		Expect(get(cached, "/apps")).To(Equal(`{"desired_lrp_scheduling_infos":[]}` + "\n"))
		Expect(get(cached, "/tasks")).To(Equal("[]\n"))
		for i := range 3 {
			Expect(backend.DesireLRP(ctx, lrpNumber(i))).To(Succeed())
		}
		Expect(backend.DesireTask(ctx, backendtest.SampleTask())).To(Succeed())
		Expect(get(cached, "/apps")).To(Equal(get(perCall, "/apps")))
		Expect(get(cached, "/tasks")).To(Equal(get(perCall, "/tasks")))
		Expect(get(cached, "/apps")).To(ContainSubstring(lrpNumber(2).ProcessGUID()))
	})

	It("is never stale after a desire, an update or a stop, with other lists in flight", func() {
		// Other callers keep encoding and holding bodies while the writes happen.
		done := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				defer GinkgoRecover()
				for {
					select {
					case <-done:
						return
					default:
						get(cached, "/apps")
					}
				}
			})
		}
		DeferCleanup(func() { close(done); wg.Wait() })

		for i := range 4 {
			lrp := lrpNumber(i)
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			body := get(cached, "/apps")
			Expect(body).To(ContainSubstring(lrp.ProcessGUID()))
			Expect(body).To(Equal(get(perCall, "/apps")))

			Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Instances: ptr.To(int32(7)), Annotation: ptr.To(fmt.Sprintf("170000000%d.5", i))})).To(Succeed())
			body = get(cached, "/apps")
			Expect(body).To(ContainSubstring(fmt.Sprintf(`"annotation":"170000000%d.5","instances":7`, i)))
			Expect(body).To(Equal(get(perCall, "/apps")))
		}
		for i := range 4 {
			lrp := lrpNumber(i)
			Expect(backend.StopLRP(ctx, lrp.LRPIdentifier)).To(Succeed())
			body := get(cached, "/apps")
			Expect(body).NotTo(ContainSubstring(lrp.ProcessGUID()))
			Expect(body).To(Equal(get(perCall, "/apps")))
		}
		Expect(get(cached, "/apps")).To(Equal(`{"desired_lrp_scheduling_infos":[]}` + "\n"))
	})

	It("follows changes made by others, through the informer", func() {
		Expect(backend.DesireLRP(ctx, lrpNumber(1))).To(Succeed())
		before := get(cached, "/apps")
		version, err := backend.LRPListVersion(ctx)
		Expect(err).NotTo(HaveOccurred())

		list, err := client.AppsV1().Deployments(backendtest.Namespace).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		other := list.Items[0].DeepCopy()
		other.Name, other.UID, other.ResourceVersion = "made-by-someone-else", "", ""
		other.Labels[names.LabelGUID] = lrpNumber(2).GUID
		_, err = client.AppsV1().Deployments(backendtest.Namespace).Create(ctx, other, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string { return get(cached, "/apps") }).Should(ContainSubstring(lrpNumber(2).ProcessGUID()))
		Expect(backend.LRPListVersion(ctx)).To(BeNumerically(">", version))
		Expect(get(cached, "/apps")).To(Equal(get(perCall, "/apps")))

		Expect(client.AppsV1().Deployments(backendtest.Namespace).Delete(ctx, other.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() string { return get(cached, "/apps") }).Should(Equal(before))
	})

	It("keeps the list version while the cache does not change", func() {
		Expect(backend.DesireLRP(ctx, lrpNumber(1))).To(Succeed())
		Expect(backend.DesireTask(ctx, backendtest.SampleTask())).To(Succeed())
		lrpVersion, err := backend.LRPListVersion(ctx)
		Expect(err).NotTo(HaveOccurred())
		taskVersion, err := backend.TaskListVersion(ctx)
		Expect(err).NotTo(HaveOccurred())
		lrps, v, err := backend.ListLRPsVersioned(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(v).To(Equal(lrpVersion))
		again, v, err := backend.ListLRPsVersioned(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(v).To(Equal(lrpVersion))
		Expect(again).To(HaveLen(1))
		Expect(again).To(Equal(lrps)) // built again, to the same list
		tasks, v, err := backend.ListTasksVersioned(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(v).To(Equal(taskVersion))
		Expect(tasks).To(HaveLen(1))
		tasksAgain, v, err := backend.ListTasksVersioned(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(v).To(Equal(taskVersion))
		Expect(tasksAgain).To(Equal(tasks))

		Expect(backend.StopLRP(ctx, lrpNumber(1).LRPIdentifier)).To(Succeed())
		Expect(backend.LRPListVersion(ctx)).To(BeNumerically(">", lrpVersion))
		Expect(backend.CancelTask(ctx, backendtest.SampleTaskGUID)).To(Succeed())
		Expect(backend.TaskListVersion(ctx)).To(BeNumerically(">", taskVersion))
	})

	It("shows a task's desire and cancel in GET /tasks as soon as they answered", func() {
		Expect(backend.DesireTask(ctx, backendtest.SampleTask())).To(Succeed())
		body := get(cached, "/tasks")
		Expect(body).To(ContainSubstring(`"state":"RUNNING"`))
		Expect(body).To(Equal(get(perCall, "/tasks")))

		Expect(backend.CancelTask(ctx, backendtest.SampleTaskGUID)).To(Succeed())
		body = get(cached, "/tasks")
		Expect(body).To(ContainSubstring(`"state":"COMPLETED","failed":true,"failure_reason":"task was cancelled"`))
		Expect(body).To(Equal(get(perCall, "/tasks")))
	})
})
