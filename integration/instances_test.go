package integration_test

import (
	"context"
	"net/http"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/localkube"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/testsupport/fixture"
)

// setPodStatus changes a pod's status with the admin clientset, as a kubelet or the eviction
// manager would (kwok runs no containers, so the test plays their part).
func setPodStatus(ns, name string, change func(*corev1.PodStatus)) {
	ctx := context.Background()
	pod, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	change(&pod.Status)
	_, err = kube.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
}

// podUID is the uid of the named pod, "" while there is none.
func podUID(ns, name string) string {
	pod, err := kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return string(pod.UID)
}

// podPhases are the app's pods as kubectl lists them: name → phase.
func podPhases(ns string, a *app) map[string]corev1.PodPhase {
	out := map[string]corev1.PodPhase{}
	for _, p := range pods(ns, a) {
		out[p.Name] = p.Status.Phase
	}
	return out
}

func withImage(a *app, image string) {
	if a.extra == nil {
		a.extra = map[string]any{}
	}
	a.extra["lifecycle"] = fixture.DockerLifecycle(image, []string{})
}

var _ = Describe("Instances that match the pods", func() {
	var (
		o  *opiServer
		ns string
		a  *app
	)

	BeforeEach(func() {
		ns = newNamespace()
		// A short minimum ready time keeps the rollouts below quick; it still makes each new pod
		// wait Ready before an old one goes.
		o = startOpi(ns, "--min-ready", "2s")
		a = newApp()
	})

	It("reports a 1-instance app RUNNING once its evicted pod is replaced, though the failed pod stays", func() {
		a.instances = 1
		desire(o, a)
		Eventually(allRunning(o, a)).Should(Equal(running(1)))
		evicted := livePodNames(ns, a)[0]

		By("the eviction manager failing the pod (status set by the test)")
		setPodStatus(ns, evicted, func(s *corev1.PodStatus) {
			s.Phase = corev1.PodFailed
			s.Reason = "Evicted"
			s.Message = "The node was low on resource: ephemeral-storage."
			for i := range s.Conditions {
				if s.Conditions[i].Type == corev1.PodReady || s.Conditions[i].Type == corev1.ContainersReady {
					s.Conditions[i].Status = corev1.ConditionFalse
				}
			}
		})

		if statefulSets() {
			// The StatefulSet controller deletes a failed pod itself and makes its ordinal again,
			// under the same name: there is never a failed pod beside a replacement to rank.
			By("the StatefulSet replacing the failed pod under its name, reported RUNNING at index 0")
			failedUID := podUID(ns, evicted)
			Eventually(func() bool { uid := podUID(ns, evicted); return uid != "" && uid != failedUID }).Should(BeTrue())
			Eventually(allRunning(o, a)).Should(Equal(running(1)))
			return
		}
		By("the ReplicaSet starting a replacement beside it, which takes index 0")
		Eventually(func() map[string]corev1.PodPhase { return podPhases(ns, a) }).Should(And(
			HaveLen(2), HaveKeyWithValue(evicted, corev1.PodFailed), ContainElement(corev1.PodRunning)))
		Eventually(allRunning(o, a)).Should(Equal(running(1)))
		Expect(podPhases(ns, a)).To(HaveKeyWithValue(evicted, corev1.PodFailed), "the failed pod is still there, not ranked")

		By("stop/0 restarting the live pod, not the failed one")
		var replacement string
		for name, phase := range podPhases(ns, a) {
			if phase == corev1.PodRunning {
				replacement = name
			}
		}
		status, body := o.call("PUT", a.path()+"/stop/0", "")
		Expect(status).To(Equal(http.StatusOK), body)
		Eventually(func() map[string]corev1.PodPhase { return podPhases(ns, a) }).ShouldNot(HaveKey(replacement))
		Expect(podPhases(ns, a)).To(HaveKey(evicted))
		Eventually(allRunning(o, a)).Should(Equal(running(1)))
	})

	It("reports an image that cannot be pulled as CRASHED with the reason CC shows", func() {
		a.instances = 1
		// localkube's kwok stage reports such an image as a kubelet does: ImagePullBackOff.
		withImage(a, "registry.example.com/"+localkube.UnpullableImage+":1")
		desire(o, a)
		message := `Back-off pulling image "registry.example.com/does-not-exist:1"`
		reason := "Failed to pull the image: " + message
		Eventually(func() []models.Instance { return instances(o, a).Instances }).Should(ConsistOf(And(
			HaveField("Index", BeEquivalentTo(0)),
			HaveField("State", "CRASHED"),
			HaveField("PlacementError", reason),
			HaveField("CrashReason", reason),
		)))
		first := instances(o, a).Instances[0].Since
		pod := livePodNames(ns, a)[0]
		Expect(kubectl("get", "pod", "-n", ns, pod, "-o", "jsonpath={.status.containerStatuses[0].state.waiting.reason}")).To(Equal("ImagePullBackOff"))

		By("keeping since while the kubelet alternates ErrImagePull and ImagePullBackOff (status set by the test)")
		setPodStatus(ns, pod, func(s *corev1.PodStatus) {
			s.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}
		})
		Eventually(func() []models.Instance { return instances(o, a).Instances }).Should(ConsistOf(And(
			HaveField("State", "CRASHED"), HaveField("CrashReason", "Failed to pull the image"), HaveField("Since", first))))
	})

	It("keeps every desired instance RUNNING through an image rollout (one down at most with StatefulSets), and a disruption budget in step", func() {
		// 4 instances: Kubernetes' default strategy (25% unavailable) would take one away at
		// once; opi's must not. A StatefulSet cannot surge (a second pod of an ordinal would
		// share its name): it replaces one pod at a time, which is one instance down at most
		// (ADR 0007).
		wantFewest := 4
		if statefulSets() {
			wantFewest = 3
		}
		a.instances = 4
		desire(o, a)
		Eventually(allRunning(o, a)).Should(Equal(running(4)))
		name := deploymentName(a)
		budget, err := kube.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(budget.Spec.MaxUnavailable.IntValue()).To(Equal(1))
		Expect(budget.OwnerReferences).To(ConsistOf(HaveField("Name", name)))

		if statefulSets() {
			// With parallel pod management the StatefulSet controller replaces every old pod
			// that is not yet available (Ready for less than the minimum ready time) at once,
			// outside maxUnavailable (measured, ADR 0007): only a rollout of available
			// instances keeps to one at a time.
			Eventually(func() workloadStatus { return workloads(ns, a)[0].Status }).Should(HaveField("AvailableReplicas", BeEquivalentTo(4)))
		}
		By("polling instances as CC does while the workload rolls to a new image")
		var (
			mu      sync.Mutex
			fewest  = 4
			samples int
		)
		done := make(chan struct{})
		stopped := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(stopped)
			for {
				select {
				case <-done:
					return
				default:
				}
				n := 0
				for _, in := range instances(o, a).Instances {
					if in.State == "RUNNING" {
						n++
					}
				}
				mu.Lock()
				fewest, samples = min(fewest, n), samples+1
				mu.Unlock()
				time.Sleep(50 * time.Millisecond)
			}
		}()
		status, body := o.call("POST", "/apps/"+a.processGUID(), fixture.UpdateLRP(a.guid, a.version, map[string]any{"image": "cloudfoundry/dora:v2"}).JSON())
		Expect(status).To(Equal(http.StatusOK), body)

		// Rolled: every pod that is left runs the new image and is Ready, and the workload
		// counts them all updated and available.
		Eventually(func() []string {
			var out []string
			for _, p := range pods(ns, a) {
				ready := "not-ready"
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
						ready = "ready"
					}
				}
				out = append(out, p.Spec.Containers[0].Image+" "+ready)
			}
			return out
		}).Should(Equal([]string{"cloudfoundry/dora:v2 ready", "cloudfoundry/dora:v2 ready", "cloudfoundry/dora:v2 ready", "cloudfoundry/dora:v2 ready"}))
		Eventually(func() workloadStatus { return workloads(ns, a)[0].Status }).Should(And(
			HaveField("UpdatedReplicas", BeEquivalentTo(4)), HaveField("AvailableReplicas", BeEquivalentTo(4))))
		close(done)
		<-stopped

		mu.Lock()
		defer mu.Unlock()
		Expect(samples).To(BeNumerically(">", 1))
		Expect(fewest).To(BeNumerically(">=", wantFewest), "RUNNING instances dropped further than the backend allows during the rollout")
		Expect(allRunning(o, a)()).To(Equal(running(4)))

		By("removing the budget below 2 instances and making it again from 2")
		status, body = o.call("POST", "/apps/"+a.processGUID(), updateBody(a, 1, "3.0"))
		Expect(status).To(Equal(http.StatusOK), body)
		_, err = kube.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), name, metav1.GetOptions{})
		Expect(err).To(MatchError(ContainSubstring("not found")))
		status, body = o.call("POST", "/apps/"+a.processGUID(), updateBody(a, 3, "4.0"))
		Expect(status).To(Equal(http.StatusOK), body)
		_, err = kube.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())

		By("the garbage collector removing it with the app")
		status, _ = o.call("PUT", a.path()+"/stop", "")
		Expect(status).To(Equal(http.StatusOK))
		Eventually(func() error {
			_, err := kube.PolicyV1().PodDisruptionBudgets(ns).Get(context.Background(), name, metav1.GetOptions{})
			return err
		}).Should(MatchError(ContainSubstring("not found")))
	})
})

// enforceRestricted labels namespace ns to enforce the restricted Pod Security Standard.
func enforceRestricted(ns string) {
	nsObj, err := kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	nsObj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	_, err = kube.CoreV1().Namespaces().Update(context.Background(), nsObj, metav1.UpdateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

var _ = Describe("Pod security", func() {
	It("runs apps in a namespace enforcing the restricted standard with --pod-security restricted", func() {
		ns := newNamespace()
		o := startOpi(ns, "--pod-security", "restricted")
		enforceRestricted(ns)

		a := newApp()
		desire(o, a)
		Eventually(allRunning(o, a)).Should(Equal(running(2)))
		pod := pods(ns, a)[0].Spec
		Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
		Expect(pod.Containers[0].SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
		Expect(pod.Containers[0].SecurityContext.Capabilities.Add).To(BeEmpty())
	})

	It("is refused by that namespace at the default level, which the pod template shows why", func() {
		ns := newNamespace()
		o := startOpi(ns)
		enforceRestricted(ns)

		a := newApp()
		desire(o, a)
		// The ReplicaSet cannot create pods: the admission refusal shows on it, as kubectl
		// describe shows; CC sees no instance (DOWN). A StatefulSet has no such condition: its
		// controller reports the refusal as an event on it, which kubectl describe shows too.
		Eventually(func() string {
			if statefulSets() {
				return kubectl("get", "events", "-n", ns, "--field-selector", "involvedObject.kind=StatefulSet,reason=FailedCreate", "-o", "jsonpath={.items[*].message}")
			}
			return kubectl("get", "replicasets", "-n", ns, "-l", selector(a), "-o", "jsonpath={.items[*].status.conditions[*].message}")
		}).Should(ContainSubstring("violates PodSecurity \"restricted"))
		Expect(pods(ns, a)).To(BeEmpty())
	})
})
