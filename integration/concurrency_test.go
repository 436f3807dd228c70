package integration_test

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/testsupport/fixture"
)

// answers collects the status codes of concurrent requests (and the bodies of unexpected ones).
type answers struct {
	mu     sync.Mutex
	codes  map[string][]int
	errors []string
}

func (a *answers) add(kind string, status int, body string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.codes == nil {
		a.codes = map[string][]int{}
	}
	if err != nil {
		a.errors = append(a.errors, kind+": "+err.Error())
		return
	}
	a.codes[kind] = append(a.codes[kind], status)
	if status >= 500 {
		a.errors = append(a.errors, fmt.Sprintf("%s: %d %s", kind, status, body))
	}
}

// updateBody is the UpdateDesiredLRPRequest CC sends to scale a.
func updateBody(a *app, instances int, annotation string) string {
	return fixture.Scale(a.guid, a.version, instances, annotation).JSON()
}

var _ = Describe("Concurrency", func() {
	var (
		o  *opiServer
		ns string
		a  *app
	)

	BeforeEach(func() {
		ns = newNamespace()
		o = startOpi(ns)
		a = newApp()
	})

	It("makes exactly one workload of 50 concurrent desires of the same app, all answered 202", func() {
		var got answers
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				status, body, err := tryCall(o, "PUT", "/apps/"+a.processGUID(), a.body())
				got.add("desire", status, body, err)
			})
		}
		wg.Wait()
		Expect(got.errors).To(BeEmpty())
		Expect(got.codes["desire"]).To(HaveLen(50))
		Expect(got.codes["desire"]).To(HaveEach(http.StatusAccepted))

		st := stateOf(kube, ns)
		Expect(st.Deployments).To(Equal(map[string][]string{a.processGUID(): {deploymentName(a)}}))
		Expect(st.Orphans).To(BeEmpty())
		Expect(st.Incomplete).To(BeEmpty(), "one env Secret and one Service, both owned by the Deployment")
		Expect(listed(o)).To(Equal(map[string]string{a.processGUID(): "1600000000.2499998"}))
		Eventually(allRunning(o, a)).Should(Equal(running(2)))
	})

	It("answers 50 concurrent updates of one app all with success, one of them winning whole", func() {
		desire(o, a)
		var got answers
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				status, body, err := tryCall(o, "POST", "/apps/"+a.processGUID(), updateBody(a, 1+i%5, fmt.Sprintf("%d.0", 1+i%5)))
				got.add("update", status, body, err)
			})
		}
		wg.Wait()
		Expect(got.errors).To(BeEmpty())
		Expect(got.codes["update"]).To(HaveEach(http.StatusOK))

		// Instances and annotation come from the same update: no mix of two.
		st := stateOf(kube, ns)
		replicas := st.Replicas[a.processGUID()]
		Expect(st.Annotations[a.processGUID()]).To(Equal(fmt.Sprintf("%d.0", replicas)))
		Expect(listed(o)).To(Equal(map[string]string{a.processGUID(): fmt.Sprintf("%d.0", replicas)}))
		Eventually(allRunning(o, a)).Should(Equal(running(int(replicas))))
	})

	It("ends concurrent updates and a stop of one app in a state CC converges from", func() {
		for round := range 3 {
			desire(o, a)
			var got answers
			var wg sync.WaitGroup
			for i := range 10 {
				wg.Go(func() {
					status, body, err := tryCall(o, "POST", "/apps/"+a.processGUID(), updateBody(a, 1+i%3, fmt.Sprintf("%d.0", 1+i%3)))
					got.add("update", status, body, err)
				})
				if i == 4 {
					wg.Go(func() {
						time.Sleep(time.Duration(round*40) * time.Millisecond) // let some updates in first
						status, body, err := tryCall(o, "PUT", a.path()+"/stop", "")
						got.add("stop", status, body, err)
					})
				}
			}
			wg.Wait()
			Expect(got.errors).To(BeEmpty())
			Expect(got.codes["stop"]).To(Equal([]int{http.StatusOK}))
			Expect(got.codes["update"]).To(HaveEach(BeElementOf(http.StatusOK, http.StatusNotFound)))
			GinkgoWriter.Printf("round %d: update answers %v\n", round, got.codes["update"])

			// The stop won: the app is gone from reads at once, and every object of it goes.
			Expect(listed(o)).NotTo(HaveKey(a.processGUID()))
			status, _ := o.call("GET", a.path(), "")
			Expect(status).To(Equal(http.StatusNotFound))
			Eventually(func() []string { return leftObjects(ns, a) }, 60*time.Second).Should(BeEmpty())
		}

		// CC desires it again (a new start): it converges to exactly what is desired.
		desire(o, a)
		status, body := o.call("POST", "/apps/"+a.processGUID(), updateBody(a, 3, "9.0"))
		Expect(status).To(Equal(http.StatusOK), body)
		Expect(listed(o)).To(Equal(map[string]string{a.processGUID(): "9.0"}))
		Eventually(allRunning(o, a)).Should(Equal(running(3)))
		st := stateOf(kube, ns)
		Expect(st.Orphans).To(BeEmpty())
		Expect(st.Incomplete).To(BeEmpty())
	})

	It("ends concurrent desires, updates and stops of one app either absent or complete, and a desire converges it", func() {
		for round := range 3 {
			var got answers
			var wg sync.WaitGroup
			for i := range 12 {
				switch i % 4 {
				case 0, 1:
					wg.Go(func() {
						status, body, err := tryCall(o, "PUT", "/apps/"+a.processGUID(), a.body())
						got.add("desire", status, body, err)
					})
				case 2:
					wg.Go(func() {
						status, body, err := tryCall(o, "POST", "/apps/"+a.processGUID(), updateBody(a, 1, "5.0"))
						got.add("update", status, body, err)
					})
				case 3:
					wg.Go(func() {
						status, body, err := tryCall(o, "PUT", a.path()+"/stop", "")
						got.add("stop", status, body, err)
					})
				}
			}
			wg.Wait()
			Expect(got.errors).To(BeEmpty())
			GinkgoWriter.Printf("round %d: %v\n", round, got.codes)
			Expect(got.codes["stop"]).To(HaveEach(http.StatusOK))
			Expect(got.codes["update"]).To(HaveEach(BeElementOf(http.StatusOK, http.StatusNotFound)))
			// A desire racing a stop may find its Deployment gone under it: 503, retry later.
			Expect(got.codes["desire"]).To(HaveEach(BeElementOf(http.StatusAccepted, http.StatusServiceUnavailable)))

			// Either absent (every object goes) or present and complete.
			if _, ok := listed(o)[a.processGUID()]; ok {
				Eventually(func(g Gomega) {
					st := stateOf(kube, ns)
					g.Expect(st.Deployments[a.processGUID()]).To(HaveLen(1))
					g.Expect(st.Incomplete).To(BeEmpty())
					g.Expect(st.Orphans).To(BeEmpty())
				}, 30*time.Second, time.Second).Should(Succeed())
			} else {
				// Leftovers of a desire that lost to the stop are what CC's next desire completes
				// (or, if CC wants the app stopped, its next stop deletes).
				status, _ := o.call("PUT", a.path()+"/stop", "")
				Expect(status).To(Equal(http.StatusOK))
				Eventually(func() []string { return leftObjects(ns, a) }, 60*time.Second).Should(BeEmpty())
			}
		}
		desire(o, a)
		status, body := o.call("POST", "/apps/"+a.processGUID(), updateBody(a, 2, "7.0"))
		Expect(status).To(Equal(http.StatusOK), body)
		Expect(listed(o)).To(Equal(map[string]string{a.processGUID(): "7.0"}))
		Eventually(allRunning(o, a)).Should(Equal(running(2)))
		st := stateOf(kube, ns)
		Expect(st.Orphans).To(BeEmpty())
		Expect(st.Incomplete).To(BeEmpty())
	})
})
