package task_test

import (
	"context"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/janitor"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// Tasks run code of the tenant's choosing like apps do: the namespace's baseline isolates their
// pods too, and their egress is their app's.
var _ = Describe("Tasks' network isolation", func() {
	var (
		ctx     context.Context
		client  *fake.Clientset
		backend *k8s.Backend
		opts    k8s.Options
		task    *opi.Task
		jobName string
	)
	dns := intstr.FromInt32(53)
	p443 := intstr.FromInt32(443)
	block := func(cidr string) networkingv1.NetworkPolicyPeer {
		return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr}}
	}
	policy := func(name string) *networkingv1.NetworkPolicy {
		p, err := client.NetworkingV1().NetworkPolicies(backendtest.Namespace).Get(ctx, name, metav1.GetOptions{})
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		return p
	}
	policyNames := func() []string {
		list, err := client.NetworkingV1().NetworkPolicies(backendtest.Namespace).List(ctx, metav1.ListOptions{})
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		var names []string
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
		return names
	}
	selects := func(p *networkingv1.NetworkPolicy, podLabels map[string]string) bool {
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		return sel.Matches(labels.Set(podLabels))
	}

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		opts = k8s.Options{
			Hooks: hooks.Options{NetworkPolicy: hooks.NetworkPolicyOptions{
				Enabled:      true,
				Routers:      []hooks.PolicyPeer{{Namespace: "ingress-nginx", PodLabels: map[string]string{"app": "ingress"}}},
				DNSNamespace: "kube-system",
			}},
			Janitor: janitor.Options{Grace: time.Minute},
		}
		task = backendtest.SampleTask()
		jobName = names.TaskJobName(task.GUID)
	})
	JustBeforeEach(func() {
		backend = backendtest.StartBackendWith(client, opts)
	})

	It("has a baseline that selects app and task pods: no ingress, egress to DNS only", func() {
		Expect(policy(hooks.BaselinePolicyName).Spec).To(Equal(networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: names.LabelSourceType, Operator: metav1.LabelSelectorOpIn, Values: []string{"APP", "TASK"},
			}}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}}}},
				Ports: []networkingv1.NetworkPolicyPort{
					{Protocol: ptr.To(corev1.ProtocolUDP), Port: &dns},
					{Protocol: ptr.To(corev1.ProtocolTCP), Port: &dns},
				},
			}},
		}))
	})

	It("lets the routers reach app pods only, not task pods", func() {
		routers := policy(hooks.RoutersPolicyName)
		Expect(routers.Spec).To(Equal(networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{names.LabelSourceType: "APP"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "ingress-nginx"}},
				PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ingress"}},
			}}}},
		}))

		Expect(backend.DesireTask(ctx, task)).To(Succeed())
		pod := getJob(client, jobName).Spec.Template.Labels
		Expect(selects(policy(hooks.BaselinePolicyName), pod)).To(BeTrue(), "the task's pod is isolated by the baseline")
		Expect(selects(routers, pod)).To(BeFalse(), "no ingress to the task's pod")
	})

	Context("when a baseline of the previous shape exists (apps only, with the routers)", func() {
		BeforeEach(func() {
			old := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: hooks.BaselinePolicyName, Namespace: backendtest.Namespace}}
			old.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{names.LabelSourceType: "APP"}}
			old.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
			client = backendtest.NewClient(old)
		})
		It("creates the routers' policy before it rewrites the baseline, so that apps keep their ingress", func() {
			var writes []string
			for _, a := range backendtest.ActionsSince(client, 0) {
				if a == "create networkpolicies "+hooks.RoutersPolicyName || a == "update networkpolicies "+hooks.BaselinePolicyName {
					writes = append(writes, a)
				}
			}
			Expect(writes).To(Equal([]string{"create networkpolicies " + hooks.RoutersPolicyName, "update networkpolicies " + hooks.BaselinePolicyName}))
			Expect(policy(hooks.BaselinePolicyName).Spec.PodSelector.MatchExpressions).To(HaveLen(1))
		})
	})

	It("gives a task its app's LRP's egress rules, in a policy controlled by the Job", func() {
		lrp := backendtest.SampleLRP()
		lrp.EgressRules = []opi.EgressRule{
			{Protocol: "tcp", Destinations: []string{"10.0.0.0/8"}, Ports: []opi.PortRange{{Start: 443, End: 443}}},
			{Protocol: "all", Destinations: []string{"192.168.0.0/16"}},
		}
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		task.AppGUID = lrp.AppGUID

		from := len(client.Actions())
		Expect(backend.DesireTask(ctx, task)).To(Succeed())
		Expect(backendtest.ActionsSince(client, from)).To(Equal([]string{
			"create secrets " + jobName + "-env",
			"create secrets " + jobName + "-registry",
			"create jobs " + jobName,
			"create networkpolicies " + jobName,
			"patch secrets " + jobName + "-env",
			"patch secrets " + jobName + "-registry",
		}))
		p := policy(jobName)
		job := getJob(client, jobName)
		Expect(p.OwnerReferences).To(ConsistOf(And(
			HaveField("Kind", "Job"), HaveField("Name", jobName), HaveField("UID", job.UID), HaveField("Controller", ptr.To(true)))))
		Expect(p.Labels).To(HaveKeyWithValue(names.LabelSourceType, "TASK"))
		Expect(p.Spec).To(Equal(networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{names.LabelSourceType: "TASK", names.LabelTaskGUID: task.GUID}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{
				{To: []networkingv1.NetworkPolicyPeer{block("10.0.0.0/8")}, Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: &p443}}},
				{To: []networkingv1.NetworkPolicyPeer{block("192.168.0.0/16")}},
			},
		}))
		Expect(selects(p, job.Spec.Template.Labels)).To(BeTrue(), "the policy selects the task's pod")

		By("a repeated desire changes nothing")
		from = len(client.Actions())
		Expect(backend.DesireTask(ctx, task)).To(Succeed())
		Expect(backendtest.ActionsSince(client, from)).NotTo(ContainElement(HavePrefix("update networkpolicies")))
		Expect(policyNames()).To(ConsistOf(hooks.BaselinePolicyName, hooks.RoutersPolicyName, names.DeploymentName(lrp), jobName))
	})

	It("creates the policy a desire interrupted after the Job when the desire is repeated", func() {
		lrp := backendtest.SampleLRP()
		lrp.EgressRules = []opi.EgressRule{{Protocol: "all", Destinations: []string{"192.168.0.0/16"}}}
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		task.AppGUID = lrp.AppGUID
		var failed atomic.Bool
		client.PrependReactor("create", "networkpolicies", func(k8stesting.Action) (bool, runtime.Object, error) {
			if failed.CompareAndSwap(false, true) {
				return true, nil, backendtest.ConnectionRefused
			}
			return false, nil, nil
		})
		Expect(backend.DesireTask(ctx, task)).To(HaveOccurred())
		Expect(failed.Load()).To(BeTrue(), "the fault fired")
		Expect(policyNames()).NotTo(ContainElement(jobName))

		Expect(backend.DesireTask(ctx, task)).To(Succeed())
		Expect(policy(jobName).Spec.Egress).To(ConsistOf(HaveField("To", ConsistOf(block("192.168.0.0/16")))))
		Expect(policy(jobName).OwnerReferences).To(ConsistOf(HaveField("UID", getJob(client, jobName).UID)))
	})

	Context("when the app's workload holds an icmp rule (desired while policies were off)", func() {
		BeforeEach(func() {
			lrp := backendtest.SampleLRP()
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
				Name: names.DeploymentName(lrp), Namespace: backendtest.Namespace,
				Labels: map[string]string{
					names.LabelGUID: lrp.GUID, names.LabelVersion: lrp.Version, names.LabelAppGUID: lrp.AppGUID,
					names.LabelSourceType: "APP", names.LabelManagedBy: "opi",
				},
				Annotations: map[string]string{names.AnnotationEgressRules: `[{"protocol":"icmp","destinations":["0.0.0.0/0"],"icmp_type":-1,"icmp_code":-1},{"protocol":"tcp","destinations":["10.0.0.0/8"],"ports":[{"start":443,"end":443}],"icmp_type":-1,"icmp_code":-1}]`},
			}}
			client = backendtest.NewClient(d)
			task.AppGUID = lrp.AppGUID
		})
		It("leaves the icmp rule out instead of allowing everything", func() {
			Expect(backend.DesireTask(ctx, task)).To(Succeed())
			Expect(policy(jobName).Spec.Egress).To(Equal([]networkingv1.NetworkPolicyEgressRule{
				{To: []networkingv1.NetworkPolicyPeer{block("10.0.0.0/8")}, Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolTCP), Port: &p443}}},
			}))
		})
	})

	Context("with default task egress rules", func() {
		BeforeEach(func() {
			opts.Hooks.NetworkPolicy.TaskDefaultEgress = []opi.EgressRule{{Protocol: "udp", Destinations: []string{"10.1.2.3/32"}}}
		})

		It("gives a task of an app whose LRP has no rules no policy of its own: DNS only, not the default", func() {
			lrp := backendtest.SampleLRP()
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			task.AppGUID = lrp.AppGUID
			Expect(backend.DesireTask(ctx, task)).To(Succeed())
			Expect(policyNames()).To(ConsistOf(hooks.BaselinePolicyName, hooks.RoutersPolicyName))
		})

		It("gives a task of an app without an LRP the operator's default rules", func() {
			Expect(backend.DesireTask(ctx, task)).To(Succeed())
			Expect(policy(jobName).Spec.Egress).To(Equal([]networkingv1.NetworkPolicyEgressRule{{
				To: []networkingv1.NetworkPolicyPeer{block("10.1.2.3/32")}, Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP)}},
			}}))
			Expect(policy(jobName).OwnerReferences).To(ConsistOf(HaveField("Name", jobName)))
		})

		It("gives a task of an app being deleted the default (the app has no LRP then)", func() {
			lrp := backendtest.SampleLRP()
			lrp.EgressRules = []opi.EgressRule{{Protocol: "all", Destinations: []string{"0.0.0.0/0"}}}
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			Expect(backend.StopLRP(ctx, lrp.LRPIdentifier)).To(Succeed())
			task.AppGUID = lrp.AppGUID
			Expect(backend.DesireTask(ctx, task)).To(Succeed())
			Expect(policy(jobName).Spec.Egress).To(ConsistOf(HaveField("To", ConsistOf(block("10.1.2.3/32")))))
		})
	})

	It("gives a task of an app without an LRP, and no default, DNS only (no policy of its own)", func() {
		from := len(client.Actions())
		Expect(backend.DesireTask(ctx, task)).To(Succeed())
		Expect(backendtest.ActionsSince(client, from)).NotTo(ContainElement(HavePrefix("create networkpolicies")))
	})

	Context("when network policies are off", func() {
		BeforeEach(func() {
			opts.Hooks.NetworkPolicy.Enabled = false
			opts.Hooks.NetworkPolicy.TaskDefaultEgress = []opi.EgressRule{{Protocol: "all", Destinations: []string{"0.0.0.0/0"}}}
		})
		It("writes no policy", func() {
			Expect(backend.DesireTask(ctx, task)).To(Succeed())
			Expect(policyNames()).To(BeEmpty())
		})
	})
})
