package integration_test

import (
	"context"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/testsupport/fixture"
)

// selects tells whether the policy's pod selector matches the pod's labels, as a network plugin
// decides it (the local control plane runs none: policies are checked as objects).
func selects(p networkingv1.NetworkPolicy, pod corev1.Pod) bool {
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return sel.Matches(labels.Set(pod.Labels))
}

var _ = Describe("Tenant isolation", func() {
	It("isolates a task's pod with the baseline policy, gives it no ingress, and its app's egress rules in a policy owned by its Job", func() {
		cc := startCC()
		ns := newNamespace()
		o := startOpi(ns, append(cc.OpiArgs(), "--router", "ingress-nginx:app=ingress")...)

		a := newApp()
		a.instances = 1
		a.extra = map[string]any{"egress_rules": []any{
			map[string]any{"protocol": "tcp", "destinations": []any{"10.0.0.0/8"}, "ports": []any{5432}},
		}}
		desire(o, a)

		guid := fixture.NewGUID()
		body := fixture.Task(cc.URL+"/internal/v4/tasks/"+guid+"/completed", "sleep 30").Merge(map[string]any{
			"app_guid": "app-" + a.guid, // fixture.DesireLRP's app guid
		})
		status, resp := o.call(http.MethodPost, "/tasks/"+guid, body.JSON())
		Expect(status).To(Equal(http.StatusAccepted), resp)

		var pod corev1.Pod
		Eventually(func() []corev1.Pod {
			list, err := kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: names.LabelTaskGUID + "=" + guid})
			Expect(err).NotTo(HaveOccurred())
			if len(list.Items) > 0 {
				pod = list.Items[0]
			}
			return list.Items
		}, "30s").Should(HaveLen(1))

		var policies networkingv1.NetworkPolicyList
		kubectlJSON(&policies, "get", "networkpolicies", "-n", ns)
		byName := map[string]networkingv1.NetworkPolicy{}
		var selecting []string
		for _, p := range policies.Items {
			byName[p.Name] = p
			if selects(p, pod) {
				selecting = append(selecting, p.Name)
			}
		}
		jobName := names.TaskJobName(guid)
		Expect(selecting).To(ConsistOf("opi-apps", jobName), "the baseline and the task's own policy, not the routers' nor the app's")
		Expect(byName["opi-apps"].Spec.Ingress).To(BeEmpty(), "no ingress")
		Expect(byName["opi-apps"].Spec.Egress).To(HaveLen(1), "DNS only")

		mine := byName[jobName]
		Expect(mine.Spec.PolicyTypes).To(Equal([]networkingv1.PolicyType{networkingv1.PolicyTypeEgress}))
		Expect(mine.Spec.Egress).To(HaveLen(1))
		Expect(mine.Spec.Egress[0].To).To(ConsistOf(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}}))
		Expect(mine.Spec.Egress[0].Ports).To(ConsistOf(And(
			HaveField("Protocol", ptr.To(corev1.ProtocolTCP)), HaveField("Port.IntVal", BeEquivalentTo(5432)))))
		job, err := kube.BatchV1().Jobs(ns).Get(context.Background(), jobName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(mine.OwnerReferences).To(ConsistOf(And(HaveField("Kind", "Job"), HaveField("UID", job.UID))))

		// The app's pod is made by the workload's controller after the desire answered: wait for it
		// (reading it at once raced the controller and failed one StatefulSet run).
		var appPods []corev1.Pod
		Eventually(func() []corev1.Pod { appPods = pods(ns, a); return appPods }, "30s").ShouldNot(BeEmpty())
		Expect(selects(byName["opi-apps-routers"], appPods[0])).To(BeTrue(), "the routers still reach the app")
		Expect(selects(byName["opi-apps"], appPods[0])).To(BeTrue())
	})

	It("creates the apps' namespace enforcing pod_security, where the API server refuses a privileged pod", func() {
		ns := newNamespace()
		startOpiWith(cluster.Kubeconfig(), ns)
		got, err := kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "baseline"))
		Expect(got.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce-version", "latest"))
		// Until its default ServiceAccount exists the API server refuses any pod there, for that.
		Expect(cluster.WaitForDefaultServiceAccount(context.Background(), ns)).To(Succeed())

		privileged := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "privileged", Namespace: ns},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "c", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
			}}},
		}
		_, err = kube.CoreV1().Pods(ns).Create(context.Background(), privileged, metav1.CreateOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err).To(MatchError(ContainSubstring(`violates PodSecurity "baseline:latest"`)))
	})

	It("warns at start-up when the namespace it is given enforces no pod security level", func() {
		ns := newNamespace()
		o := startOpi(ns) // the namespace is made beforehand, as an operator does, without the label
		Expect(o.Logs()).To(ContainSubstring(`"message":"opi.namespace-pod-security"`))
		Expect(o.Logs()).To(ContainSubstring("kubectl label namespace " + ns + " pod-security.kubernetes.io/enforce=baseline"))
	})
})
