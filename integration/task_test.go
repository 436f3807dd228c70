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

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/testsupport/ccstandin"
)

var _ = Describe("Tasks", func() {
	var (
		opi *opiServer
		cc  *ccstandin.Server
		ns  string
	)

	BeforeEach(func() {
		var err error
		cc, err = ccstandin.Start(ccstandin.Options{TLS: true, Dir: GinkgoT().TempDir(), Log: GinkgoWriter})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(cc.Close)
		ns = newNamespace()
		opi = startOpi(ns,
			"--cc-ca", cc.CAFile, "--cc-client-cert", cc.ClientCertFile, "--cc-client-key", cc.ClientKeyFile,
			"--leader-lease-duration", "4s", "--leader-renew-deadline", "3s", "--leader-retry-period", "1s",
			"--task-retention", "2s")
	})

	callbackPath := func(guid string) string { return "/internal/v4/tasks/" + guid + "/completed" }

	desire := func(guid, command string) {
		body := fmt.Sprintf(`{
			"name": "migrate", "app_guid": "app-%[1]s", "app_name": "dora", "org_guid": "o", "org_name": "org",
			"space_guid": "s", "space_name": "space",
			"environment": [{"name": "MEMORY_LIMIT", "value": "256m"}, {"name": "SECRET", "value": "hunter2"}],
			"completion_callback": "%[2]s",
			"lifecycle": {"docker_lifecycle": {"image": "busybox", "command": ["/bin/sh", "-c", %[3]q]}}
		}`, guid, cc.URL+callbackPath(guid), command)
		status, resp := opi.call(http.MethodPost, "/tasks/"+guid, body)
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
			_, err := kube.BatchV1().Jobs(ns).Get(context.Background(), k8s.TaskJobName(guid), metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}
	}

	It("reports a task that succeeds once, stops listing it and deletes its Job", func() {
		guid := newGUID()
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
		guid := newGUID()
		desire(guid, "exit 3")
		Eventually(accepted(guid)).Should(ConsistOf(MatchJSON(fmt.Sprintf(`{"task_guid":%q,"failed":true,"failure_reason":"Error (exit code 3)"}`, guid))))
		Eventually(jobGone(guid)).Should(BeTrue())
	})

	It("runs a task as a one-pod Job with its env in a Secret, lists it while it runs, and cancels it once", func() {
		guid := newGUID()
		desire(guid, "sleep 3600")

		job, err := kube.BatchV1().Jobs(ns).Get(context.Background(), k8s.TaskJobName(guid), metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(*job.Spec.BackoffLimit).To(BeZero())
		Expect(string(job.Spec.Template.Spec.RestartPolicy)).To(Equal("Never"))
		Expect(job.Labels).To(HaveKeyWithValue(k8s.LabelSourceType, k8s.SourceTypeTask))
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
		status, _ = opi.call(http.MethodDelete, "/tasks/"+newGUID(), "")
		Expect(status).To(Equal(http.StatusNotFound))
		Expect(accepted(guid)()).To(HaveLen(1))
	})

	It("retries a callback Cloud Controller fails", func() {
		guid := newGUID()
		cc.FailNext(callbackPath(guid), 2, http.StatusServiceUnavailable)
		desire(guid, "exit 0")
		Eventually(accepted(guid)).Should(HaveLen(1))
		Expect(cc.CallbacksTo(callbackPath(guid))).To(HaveLen(3))
	})

	It("loses nothing when opi dies between a task's end and Cloud Controller accepting it", func() {
		guid := newGUID()
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
