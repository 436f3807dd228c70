package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/opi-bridge/opi/localkube"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/testsupport/ccstandin"
)

var _ = Describe("Crash reports", func() {
	var (
		ns      string
		standin *ccstandin.Server
		a       *app
		ccArgs  []string
	)

	BeforeEach(func() {
		ns = newNamespace()
		standin = startCC()
		ccArgs = append(standin.OpiArgs(),
			// A killed leader's Lease is taken over within seconds.
			"--leader-lease-duration", "4s", "--leader-renew-deadline", "3s", "--leader-retry-period", "1s",
		)
		a = newApp()
		// localkube's kwok stage reports such pods crash-looping: restartCount 1, last exit 1.
		a.extra = map[string]any{"user_defined_annotations": map[string]string{localkube.CrashAnnotation: "true"}}
	})

	crashPath := func() string { return "/internal/v4/apps/" + a.processGUID() + "/crashed" }
	// accepted are the crash reports the stand-in accepted, oldest first.
	accepted := func() []models.CrashReport {
		var out []models.CrashReport
		for _, cb := range standin.Accepted(crashPath()) {
			var r models.CrashReport
			Expect(json.Unmarshal(cb.Body, &r)).To(Succeed())
			out = append(out, r)
		}
		return out
	}
	// crashedPod waits until the pod's app container has crashed count-1 restarts ago.
	crashedPod := func(name string, restarts int32) *corev1.Pod {
		var pod *corev1.Pod
		EventuallyWithOffset(1, func() int32 {
			p, err := kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil || len(p.Status.ContainerStatuses) == 0 {
				return -1
			}
			pod = p
			return p.Status.ContainerStatuses[0].RestartCount
		}).Should(Equal(restarts))
		return pod
	}
	// expectedBody is the report CC must get for the pod's last crash.
	expectedBody := func(pod *corev1.Pod, index, count int) string {
		s := pod.Status.ContainerStatuses[0]
		last := s.LastTerminationState.Terminated
		description := fmt.Sprintf("Exited with status %d", last.ExitCode) // Diego's wording
		if last.Reason == "OOMKilled" {
			description += " (out of memory)"
		}
		return fmt.Sprintf(`{"instance":%q,"index":%d,"reason":"CRASHED","exit_status":%d,"exit_description":%q,"crash_count":%d,"crash_timestamp":%d}`,
			pod.Name, index, last.ExitCode, description, count, last.FinishedAt.Unix())
	}
	bodies := func() []string {
		var out []string
		for _, cb := range standin.Accepted(crashPath()) {
			out = append(out, string(cb.Body))
		}
		return out
	}
	// crashAgain is the kubelet reporting that the pod's container was restarted and crashed
	// once more, OOM-killed this time.
	crashAgain := func(name string) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p, err := kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			s := &p.Status.ContainerStatuses[0]
			now := metav1.NewTime(time.Now().Truncate(time.Second))
			s.RestartCount++
			s.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: "OOMKilled", StartedAt: now, FinishedAt: now,
			}}
			_, err = kube.CoreV1().Pods(ns).UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
			return err
		})
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
	}
	markOf := func(name string) func() string {
		return func() string {
			p, err := kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return p.Annotations["opi-bridge.io/crashes-reported"]
		}
	}

	It("reports each crash once, retrying while CC fails, and not again after a restart of opi", func() {
		// CC fails the first two attempts: the report arrives with the third.
		standin.FailNext(crashPath(), 2, 503)
		o := startOpi(ns, ccArgs...)
		a.instances = 1
		desire(o, a)

		Eventually(func() []string { return livePodNames(ns, a) }).Should(HaveLen(1))
		name := livePodNames(ns, a)[0]
		pod := crashedPod(name, 1)
		Eventually(bodies, 90*time.Second).Should(HaveLen(1))
		Expect(bodies()[0]).To(MatchJSON(expectedBody(pod, 0, 2)))
		Expect(standin.CallbacksTo(crashPath())).To(HaveLen(3), "two failed attempts, then the accepted one")
		Eventually(markOf(name)).Should(Equal("2"))

		crashAgain(name)
		pod = crashedPod(name, 2)
		Eventually(bodies).Should(HaveLen(2))
		Expect(bodies()[1]).To(MatchJSON(expectedBody(pod, 0, 3)))
		Eventually(markOf(name)).Should(Equal("3"))

		// A restarted opi reports only what is new. Another app's crash, reported after the
		// restart, shows that the new leader has gone through the pods, and it has reported
		// nothing of this one again.
		o.restart()
		other := newApp()
		other.instances = 1
		other.extra = a.extra
		desire(o, other)
		Eventually(func() []ccstandin.Callback {
			return standin.Accepted("/internal/v4/apps/" + other.processGUID() + "/crashed")
		}, 90*time.Second).Should(HaveLen(1))
		Expect(bodies()).To(HaveLen(2))

		crashAgain(name)
		pod = crashedPod(name, 3)
		Eventually(bodies).Should(HaveLen(3))
		Expect(bodies()[2]).To(MatchJSON(expectedBody(pod, 0, 4)))
		Expect(accepted()).To(HaveEach(HaveField("Instance", name)))
		Expect(counts(accepted())).To(Equal([]int32{2, 3, 4}))
		Eventually(markOf(name)).Should(Equal("4"))
	})

	It("reports each crash once with two replicas of opi, also after the leader is killed", func() {
		kubeconfig := restrictedKubeconfig(ns)
		args := append([]string{"--create-namespace=false"}, ccArgs...)
		first := startOpiWith(kubeconfig, ns, args...)
		second := startOpiWith(kubeconfig, ns, args...)
		desire(first, a) // two instances

		Eventually(func() []string { return livePodNames(ns, a) }).Should(HaveLen(2))
		names := livePodNames(ns, a)
		pods := []*corev1.Pod{crashedPod(names[0], 1), crashedPod(names[1], 1)}
		Eventually(bodies, 90*time.Second).Should(HaveLen(2))
		Expect(bodies()).To(ConsistOf(MatchJSON(expectedBody(pods[0], 0, 2)), MatchJSON(expectedBody(pods[1], 1, 2))))
		for _, name := range names {
			Eventually(markOf(name)).Should(Equal("2"))
		}

		// Kill whichever replica leads; the other takes over and reports the next crashes.
		leader, follower := first, second
		if !strings.Contains(first.Logs(), "leader-election.leading") {
			leader, follower = second, first
		}
		Expect(leader.Logs()).To(ContainSubstring("leader-election.leading"))
		leader.kill()
		for _, name := range names {
			crashAgain(name)
		}
		pods = []*corev1.Pod{crashedPod(names[0], 2), crashedPod(names[1], 2)}
		Eventually(bodies, 90*time.Second).Should(HaveLen(4))
		Expect(bodies()[2:]).To(ConsistOf(MatchJSON(expectedBody(pods[0], 0, 3)), MatchJSON(expectedBody(pods[1], 1, 3))))
		Expect(follower.Logs()).To(ContainSubstring("leader-election.leading"))
		for _, name := range names {
			Eventually(markOf(name)).Should(Equal("3"))
		}
		leader.start() // back as a follower, so that the spec's clean-up stops it as usual
		Expect(bodies()).To(HaveLen(4))
	})
})

// counts are the reports' crash counts, in order.
func counts(reports []models.CrashReport) []int32 {
	out := make([]int32, 0, len(reports))
	for _, r := range reports {
		out = append(out, r.CrashCount)
	}
	return out
}
