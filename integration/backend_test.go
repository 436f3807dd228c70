package integration_test

import (
	"cmp"
	"context"
	"net/http"
	"os"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opi-bridge/opi/k8s"
)

// The suite runs against one backend: OPI_TEST_BACKEND (deployments, the default, or
// statefulsets), passed to every opi it starts as --backend. `make integration` runs the suite
// once per backend; a third backend adds its name here and to the Makefile (opi/README.md).
var testBackend = cmp.Or(os.Getenv("OPI_TEST_BACKEND"), k8s.Deployments)

// statefulSets says the suite runs the StatefulSet backend.
func statefulSets() bool { return testBackend == k8s.StatefulSets }

// workloadResource is the resource kubectl names the backend's workloads by.
func workloadResource() string {
	if statefulSets() {
		return "statefulsets"
	}
	return "deployments"
}

// workload is an app's Deployment or StatefulSet, with what the specs check of either.
type workload struct {
	metav1.ObjectMeta
	Spec   workloadSpec
	Status workloadStatus
	// rawSpec is the object's whole spec, for snapshots.
	rawSpec any
}

type workloadSpec struct {
	Replicas *int32
	Template corev1.PodTemplateSpec
}

type workloadStatus struct {
	UpdatedReplicas, AvailableReplicas int32
}

// listWorkloads lists the backend's workloads in ns.
func listWorkloads(client kubernetes.Interface, ns string, opts metav1.ListOptions) []workload {
	ctx := context.Background()
	var out []workload
	if statefulSets() {
		list, err := client.AppsV1().StatefulSets(ns).List(ctx, opts)
		ExpectWithOffset(2, err).NotTo(HaveOccurred())
		for _, s := range list.Items {
			out = append(out, workload{ObjectMeta: s.ObjectMeta, rawSpec: s.Spec,
				Spec:   workloadSpec{Replicas: s.Spec.Replicas, Template: s.Spec.Template},
				Status: workloadStatus{UpdatedReplicas: s.Status.UpdatedReplicas, AvailableReplicas: s.Status.AvailableReplicas}})
		}
		return out
	}
	list, err := client.AppsV1().Deployments(ns).List(ctx, opts)
	ExpectWithOffset(2, err).NotTo(HaveOccurred())
	for _, d := range list.Items {
		out = append(out, workload{ObjectMeta: d.ObjectMeta, rawSpec: d.Spec,
			Spec:   workloadSpec{Replicas: d.Spec.Replicas, Template: d.Spec.Template},
			Status: workloadStatus{UpdatedReplicas: d.Status.UpdatedReplicas, AvailableReplicas: d.Status.AvailableReplicas}})
	}
	return out
}

// workloads are the app's Deployments or StatefulSets (one, normally).
func workloads(ns string, a *app) []workload {
	return listWorkloads(kube, ns, metav1.ListOptions{LabelSelector: selector(a)})
}

// ordinal is a StatefulSet pod's ordinal, -1 for other pods.
func ordinal(p *corev1.Pod) int {
	n, err := strconv.Atoi(p.Labels[appsv1.PodIndexLabel])
	if err != nil {
		return -1
	}
	return n
}

var _ = Describe("Instance index", func() {
	It("is CF_INSTANCE_INDEX 0..n-1 from the ordinal with StatefulSets, and not set with Deployments", func() {
		ns := newNamespace()
		o := startOpi(ns)
		a := newApp()
		a.instances = 3
		desire(o, a)
		Eventually(allRunning(o, a)).Should(Equal(running(3)))

		// What an operator sees: the variable in each pod's spec, and the label it comes from.
		env := kubectl("-n", ns, "get", "pods", "-l", selector(a), "-o",
			`jsonpath={range .items[*]}{.metadata.labels.apps\.kubernetes\.io/pod-index}:{.spec.containers[0].env[?(@.name=="CF_INSTANCE_INDEX")].valueFrom.fieldRef.fieldPath}{"\n"}{end}`)
		if !statefulSets() {
			Expect(env).To(Equal(":\n:\n:\n"), "no pod-index label, no CF_INSTANCE_INDEX (ADR 0003)")
			return
		}
		field := "metadata.labels['apps.kubernetes.io/pod-index']"
		Expect(env).To(Equal("0:" + field + "\n1:" + field + "\n2:" + field + "\n"))

		By("reporting each instance at its pod's ordinal, and stop/1 restarting the pod of ordinal 1")
		uids := func() map[int]string {
			out := map[int]string{}
			for _, p := range pods(ns, a) {
				if p.DeletionTimestamp == nil {
					out[ordinal(&p)] = string(p.UID)
				}
			}
			return out
		}
		before := uids()
		Expect(before).To(HaveLen(3))
		status, body := o.call("PUT", a.path()+"/stop/1", "")
		Expect(status).To(Equal(http.StatusOK), body)
		Eventually(uids).Should(And(HaveLen(3), HaveKeyWithValue(0, before[0]), HaveKeyWithValue(2, before[2]),
			HaveKeyWithValue(1, Not(Equal(before[1])))))
		Eventually(allRunning(o, a)).Should(Equal(running(3)))

		By("scaling down to 2: ordinal 2 goes, 0 and 1 stay")
		status, body = o.call("POST", "/apps/"+a.processGUID(), updateBody(a, 2, "2.0"))
		Expect(status).To(Equal(http.StatusOK), body)
		Eventually(uids).Should(And(HaveLen(2), HaveKeyWithValue(0, before[0])))
		Eventually(allRunning(o, a)).Should(Equal(running(2)))
	})
})
