package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/testsupport/ccstandin"
	"github.com/opi-bridge/opi/testsupport/fixture"
)

var _ = Describe("Tasks", func() {
	var (
		opi *opiServer
		cc  *ccstandin.Server
		ns  string
	)

	BeforeEach(func() {
		cc = startCC()
		ns = newNamespace()
		opi = startOpi(ns, append(cc.OpiArgs(),
			"--leader-lease-duration", "4s", "--leader-renew-deadline", "3s", "--leader-retry-period", "1s",
			"--task-retention", "2s")...)
	})

	callbackPath := func(guid string) string { return "/internal/v4/tasks/" + guid + "/completed" }

	desire := func(guid, command string) {
		body := fixture.Task(cc.URL+callbackPath(guid), command).Merge(map[string]any{
			"app_guid": "app-" + guid, "app_name": "dora", "org_guid": "o", "org_name": "org",
			"space_guid": "s", "space_name": "space",
			"environment": fixture.Env("MEMORY_LIMIT", "256m", "SECRET", "hunter2"),
		})
		status, resp := opi.call(http.MethodPost, "/tasks/"+guid, body.JSON())
		Expect(status).To(Equal(http.StatusAccepted), resp)
		Expect(resp).To(MatchJSON(`{}`))
	}

	// accepted are the bodies of the callbacks for guid the stand-in accepted.
	accepted := func(guid string) func() []string {
		return func() []string {
			var out []string
			for _, cb := range cc.Accepted(callbackPath(guid)) {
				out = append(out, string(cb.Body))
			}
			return out
		}
	}

	listedGUIDs := func() []string {
		status, body := opi.call(http.MethodGet, "/tasks", "")
		Expect(status).To(Equal(http.StatusOK), body)
		var tasks []map[string]any
		Expect(json.Unmarshal([]byte(body), &tasks)).To(Succeed())
		Expect(tasks).NotTo(BeNil(), "the list is never null")
		guids := []string{}
		for _, t := range tasks {
			guids = append(guids, t["guid"].(string))
		}
		return guids
	}

	jobGone := func(guid string) func() bool {
		return func() bool {
			_, err := kube.BatchV1().Jobs(ns).Get(context.Background(), names.TaskJobName(guid), metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}
	}

	It("reports a task that succeeds once, stops listing it and deletes its Job", func() {
		guid := fixture.NewGUID()
		desire(guid, "exit 0")
		desire(guid, "exit 0") // a second desire is a no-op success

		Eventually(accepted(guid)).Should(ConsistOf(MatchJSON(fmt.Sprintf(`{"task_guid":%q,"failed":false,"failure_reason":""}`, guid))))
		Eventually(listedGUIDs).ShouldNot(ContainElement(guid))
		Eventually(jobGone(guid)).Should(BeTrue())
		Eventually(func() int {
			status, _ := opi.call(http.MethodGet, "/tasks/"+guid, "")
			return status
		}).Should(Equal(http.StatusNotFound))
		Expect(accepted(guid)()).To(HaveLen(1))
	})

	It("reports a failing task with its exit reason", func() {
		guid := fixture.NewGUID()
		desire(guid, "exit 3")
		Eventually(accepted(guid)).Should(ConsistOf(MatchJSON(fmt.Sprintf(`{"task_guid":%q,"failed":true,"failure_reason":"Exited with status 3"}`, guid))))
		Eventually(jobGone(guid)).Should(BeTrue())
	})

	It("runs a task as a one-pod Job with its env in a Secret, lists it while it runs, and cancels it once", func() {
		guid := fixture.NewGUID()
		desire(guid, "sleep 3600")

		job, err := kube.BatchV1().Jobs(ns).Get(context.Background(), names.TaskJobName(guid), metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(*job.Spec.BackoffLimit).To(BeZero())
		Expect(string(job.Spec.Template.Spec.RestartPolicy)).To(Equal("Never"))
		Expect(job.Labels).To(HaveKeyWithValue(names.LabelSourceType, names.SourceTypeTask))
		Expect(job.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String()).To(Equal("256Mi"))
		Expect(kubectl("get", "job", job.Name, "-n", ns, "-o", "yaml")).NotTo(ContainSubstring("hunter2"))
		Eventually(func() string {
			secret, err := kube.CoreV1().Secrets(ns).Get(context.Background(), job.Name+"-env", metav1.GetOptions{})
			if err != nil || metav1.GetControllerOf(secret) == nil {
				return ""
			}
			return string(metav1.GetControllerOf(secret).UID)
		}).Should(Equal(string(job.UID)))

		status, body := opi.call(http.MethodGet, "/tasks/"+guid, "")
		Expect(status).To(Equal(http.StatusOK))
		Expect(body).To(MatchJSON(fmt.Sprintf(`{"guid":%q,"name":"migrate","app_guid":"app-%s","app_name":"dora","space_guid":"s","org_guid":"o","state":"RUNNING","failed":false,"failure_reason":""}`, guid, guid)))
		Expect(listedGUIDs()).To(ContainElement(guid))
		// The pod keeps running (kwok's task stages): nothing is reported before the cancel.
		Eventually(func() string {
			out := kubectl("get", "pods", "-n", ns, "-l", "batch.kubernetes.io/job-name="+job.Name, "-o", "jsonpath={.items[*].status.phase}")
			return strings.TrimSpace(out)
		}).Should(Equal("Running"))
		Expect(accepted(guid)()).To(BeEmpty())

		status, body = opi.call(http.MethodDelete, "/tasks/"+guid, "")
		Expect(status).To(Equal(http.StatusNoContent), body)
		status, body = opi.call(http.MethodDelete, "/tasks/"+guid, "")
		Expect(status).To(SatisfyAny(Equal(http.StatusNoContent), Equal(http.StatusNotFound)), body)

		Eventually(accepted(guid)).Should(ConsistOf(MatchJSON(fmt.Sprintf(`{"task_guid":%q,"failed":true,"failure_reason":"task was cancelled"}`, guid))))
		Eventually(listedGUIDs).ShouldNot(ContainElement(guid))
		Eventually(jobGone(guid)).Should(BeTrue())

		status, body = opi.call(http.MethodDelete, "/tasks/"+guid, "")
		Expect(status).To(Equal(http.StatusNotFound), body)
		Expect(body).To(MatchJSON(`{"message":"the requested resource could not be found"}`))
		status, _ = opi.call(http.MethodDelete, "/tasks/"+fixture.NewGUID(), "")
		Expect(status).To(Equal(http.StatusNotFound))
		Expect(accepted(guid)()).To(HaveLen(1))
	})

	It("refuses a task whose completion_callback is not the configured CC's endpoint with 400, writing no Job", func() {
		guid := fixture.NewGUID()
		other := freeAddr() // loopback, another port than the stand-in's
		for _, callback := range []string{
			"https://" + other + callbackPath(guid),
			strings.Replace(cc.URL, "127.0.0.1", "localhost", 1) + callbackPath(guid),
		} {
			body := fixture.Task(callback, "exit 0").Merge(map[string]any{"app_guid": "app-" + guid})
			status, resp := opi.call(http.MethodPost, "/tasks/"+guid, body.JSON())
			Expect(status).To(Equal(http.StatusBadRequest), resp)
			Expect(resp).To(MatchJSON(fmt.Sprintf(`{"message":"completion_callback cannot be used: %s is not cc.internal_url's endpoint nor one of cc.callback_urls (scheme, host and port must match)"}`, callback)))
		}
		_, err := kube.BatchV1().Jobs(ns).Get(context.Background(), names.TaskJobName(guid), metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Job was written: %v", err)
		Expect(kubectl("get", "secrets", "-n", ns, "-o", "name")).NotTo(ContainSubstring(names.TaskJobName(guid)))
	})

	It("retries a callback Cloud Controller fails", func() {
		guid := fixture.NewGUID()
		cc.FailNext(callbackPath(guid), 2, http.StatusServiceUnavailable)
		desire(guid, "exit 0")
		Eventually(accepted(guid)).Should(HaveLen(1))
		Expect(cc.CallbacksTo(callbackPath(guid))).To(HaveLen(3))
	})

	It("loses nothing when opi dies between a task's end and Cloud Controller accepting it", func() {
		guid := fixture.NewGUID()
		cc.FailNext(callbackPath(guid), 1_000_000, http.StatusServiceUnavailable)
		desire(guid, "exit 0")
		Eventually(func() int { return len(cc.CallbacksTo(callbackPath(guid))) }).Should(BeNumerically(">=", 1))
		opi.kill()
		cc.FailNext(callbackPath(guid), 0, http.StatusServiceUnavailable)
		Expect(accepted(guid)()).To(BeEmpty())
		opi.start()

		Eventually(accepted(guid)).Should(HaveLen(1))
		Eventually(jobGone(guid)).Should(BeTrue())
		Expect(accepted(guid)()).To(HaveLen(1))
	})
})

var _ = Describe("Task callbacks to an endpoint that never answers", func() {
	It("hold no more than its share of the reporter: callbacks to the healthy endpoint are delivered meanwhile", func() {
		healthy := startCC()
		// Plain http on loopback: the stand-ins have a CA each, and opi trusts one.
		slow, err := ccstandin.Start(ccstandin.Options{Log: GinkgoWriter})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(slow.Close)
		slow.Stall()
		ns := newNamespace()
		o := startOpi(ns, append(healthy.OpiArgs(), "--cc-callback-url", slow.URL)...)

		desire := func(callbackBase string) string {
			guid := fixture.NewGUID()
			body := fixture.Task(callbackBase+"/internal/v4/tasks/"+guid+"/completed", "exit 0").Merge(map[string]any{"app_guid": "app-" + guid})
			status, resp := o.call(http.MethodPost, "/tasks/"+guid, body.JSON())
			Expect(status).To(Equal(http.StatusAccepted), resp)
			return guid
		}
		// More than the task reporter's 8 workers: without a share per endpoint every worker
		// would wait on the slow endpoint for up to the delivery bound.
		for range 10 {
			desire(slow.URL)
		}
		Eventually(slow.Held).Should(Equal(2), "cc.max_deliveries_per_endpoint (2) deliveries wait on the slow endpoint")

		guid := desire(healthy.URL)
		Eventually(func() int { return len(healthy.Accepted("/internal/v4/tasks/" + guid + "/completed")) }).Should(Equal(1), "opi said:\n%s", o.Logs())
		Expect(slow.Held()).To(Equal(2), "no more than cc.max_deliveries_per_endpoint wait on the slow endpoint")
	})
})
