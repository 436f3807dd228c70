package hooks

import (
	"context"
	"errors"
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/apiclient"
	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// BaselinePolicyName names the namespace-wide NetworkPolicy that isolates every tenant
// workload: the pods of apps and of tasks.
const BaselinePolicyName = "opi-apps"

// RoutersPolicyName names the namespace-wide NetworkPolicy that lets the routers reach the
// apps' pods (not the tasks').
const RoutersPolicyName = "opi-apps-routers"

// NetworkPolicyOptions configure container-to-container isolation.
type NetworkPolicyOptions struct {
	// Enabled makes opi keep NetworkPolicies; without it apps are not isolated.
	Enabled bool
	// Routers are who may connect to apps: pods of a namespace (all of them when PodLabels is
	// empty). No router: apps accept no connections at all.
	Routers []PolicyPeer
	// DNSNamespace, when set, lets every app reach port 53 (udp and tcp) of the pods there.
	DNSNamespace string
	// TaskDefaultEgress are the egress rules of a task whose app has no LRP with rules (CC's
	// task requests carry none); none: DNS only.
	TaskDefaultEgress []opi.EgressRule
	// RouterPorts makes the routers' policy admit the routers only on the ports SetRouterPorts
	// was last given (routing mode nats: the leader's union of the LRPs' route ports). Start
	// then creates the policy admitting nothing and leaves an existing one to the leader.
	RouterPorts bool
}

// PolicyPeer names pods by their namespace's name and, optionally, their labels; or, with
// CIDR, an address range (a classic foundation's routers are VMs, not pods).
type PolicyPeer struct {
	Namespace string
	PodLabels map[string]string
	// CIDR, when set, is the peer (an ipBlock, e.g. "10.0.16.0/24"): Namespace and PodLabels
	// are then left empty.
	CIDR string
}

// Validate says what is wrong with the peer.
func (p PolicyPeer) Validate() error {
	if p.CIDR == "" {
		if p.Namespace == "" {
			return errors.New("a router needs a namespace or a cidr")
		}
		return nil
	}
	if p.Namespace != "" || len(p.PodLabels) > 0 {
		return fmt.Errorf("router %s: a cidr goes without a namespace and pod labels", p.CIDR)
	}
	if _, _, err := net.ParseCIDR(p.CIDR); err != nil {
		return fmt.Errorf("router cidr %q is not an address range like 10.0.16.0/24", p.CIDR)
	}
	return nil
}

// NetworkPolicyHook keeps Cloud Foundry's isolation: apps accept connections only from the
// routers the operator names, never from other apps, and reach only what their egress rules
// (application security groups) allow.
//
//   - started (once per start): the namespace-wide policy BaselinePolicyName selects every app
//     and task pod (source type APP or TASK), allows no ingress and egress to DNS only (when
//     configured); RoutersPolicyName adds ingress from the routers to app pods only. Each is
//     created, or rewritten when the configuration changed (the routers' first, so that an
//     upgrade from a baseline that carried the routers never cuts them off). They belong to no
//     LRP: they stay as long as the namespace.
//   - shape: the Deployment carries the rules (names.AnnotationEgressRules), whether or not policies
//     are on, so that turning them on later gives older apps theirs through the janitor;
//   - check: an icmp rule is refused (NetworkPolicy filters tcp, udp and sctp only; a rule of
//     protocol all allows icmp too);
//   - desired: an LRP with egress rules gets a policy named like its Deployment, selecting its
//     pods, allowing egress to its rules' destinations and ports; controlled by the Deployment.
//     Policies add up, so the baseline's DNS and this are both allowed. An LRP without rules
//     has no policy of its own (and no egress beyond DNS);
//   - missing: Deployments with rules and no policy.
//
// Tasks (TaskPolicy, called by DesireTask): CC's task requests carry no egress rules, so a task
// gets those of its app's LRP (the newest workload in the cache with the task's app guid, its
// names.AnnotationEgressRules), or the operator's TaskDefaultEgress when the app has no LRP. With
// rules, a policy named like the Job, controlled by it, allows them; without, the baseline's
// DNS is all.
//
// The local control plane runs no network plugin: policies are checked as objects there.
type NetworkPolicyHook struct {
	client    kubernetes.Interface
	list      MetadataLists
	namespace string
	opts      NetworkPolicyOptions
}

// NewNetworkPolicy is the network policy hook: policies in namespace, listed through list for
// the janitor. Tasks' policies are its too (TaskPolicy).
func NewNetworkPolicy(client kubernetes.Interface, list MetadataLists, namespace string, opts NetworkPolicyOptions) *NetworkPolicyHook {
	return &NetworkPolicyHook{client: client, list: list, namespace: namespace, opts: opts}
}

func (h *NetworkPolicyHook) Name() string { return "network-policy" }

func (h *NetworkPolicyHook) Start(ctx context.Context) error {
	if !h.opts.Enabled {
		return nil
	}
	if h.opts.RouterPorts {
		// The leader's ports stay: every replica starts, only the leader knows them.
		_, _, err := kube.CreateIfAbsent(ctx, h.client.NetworkingV1().NetworkPolicies(h.namespace), h.routers(nil))
		if err != nil {
			return WrapErr(err, "create routers network policy")
		}
	} else if err := h.ensurePolicy(ctx, h.routers(nil), "routers network policy"); err != nil {
		return err
	}
	return h.ensurePolicy(ctx, h.baseline(), "baseline network policy")
}

// SetRouterPorts rewrites the routers' policy, with RouterPorts, to admit the routers on the
// TCP ports given (sorted, without repeats) and on no other; none admits nothing. It writes only
// when the policy differs.
func (h *NetworkPolicyHook) SetRouterPorts(ctx context.Context, ports []int32) error {
	if !h.opts.Enabled || !h.opts.RouterPorts {
		return nil
	}
	return h.ensurePolicy(ctx, h.routers(ports), "routers network policy")
}

// ensurePolicy creates the namespace-wide policy want, or rewrites its spec when it differs.
func (h *NetworkPolicyHook) ensurePolicy(ctx context.Context, want *networkingv1.NetworkPolicy, what string) error {
	policies := h.client.NetworkingV1().NetworkPolicies(h.namespace)
	if _, created, err := kube.CreateIfAbsent(ctx, policies, want.DeepCopy()); err != nil || created {
		return WrapErr(err, "create "+what)
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := policies.Get(ctx, want.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if equality.Semantic.DeepEqual(current.Spec, want.Spec) {
			return nil
		}
		current.Spec = want.Spec
		_, err = policies.Update(ctx, current, metav1.UpdateOptions{})
		return err
	})
	return WrapErr(err, "update "+what)
}

// baseline isolates every tenant pod: no ingress, egress to DNS only.
func (h *NetworkPolicyHook) baseline() *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{}
	p.Name, p.Namespace = BaselinePolicyName, h.namespace
	p.Labels = map[string]string{names.LabelManagedBy: names.ManagedByOPI}
	p.Spec.PodSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: names.LabelSourceType, Operator: metav1.LabelSelectorOpIn, Values: []string{names.SourceTypeApp, names.SourceTypeTask},
	}}}
	p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	// Ingress and Egress stay non-nil and empty without DNS: nothing allowed.
	p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{}
	p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{}
	if h.opts.DNSNamespace != "" {
		dns := intstr.FromInt32(53)
		p.Spec.Egress = append(p.Spec.Egress, networkingv1.NetworkPolicyEgressRule{
			To: []networkingv1.NetworkPolicyPeer{namespacePeer(h.opts.DNSNamespace, nil)},
			Ports: []networkingv1.NetworkPolicyPort{
				{Protocol: ptr.To(corev1.ProtocolUDP), Port: &dns},
				{Protocol: ptr.To(corev1.ProtocolTCP), Port: &dns},
			},
		})
	}
	return p
}

// routers lets the routers reach app pods (no rule without routers: nothing added), on ports
// only with RouterPorts (no rule without ports: a rule without ports would admit all).
func (h *NetworkPolicyHook) routers(ports []int32) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{}
	p.Name, p.Namespace = RoutersPolicyName, h.namespace
	p.Labels = map[string]string{names.LabelManagedBy: names.ManagedByOPI}
	p.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{names.LabelSourceType: names.SourceTypeApp}}
	p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	p.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{}
	if len(h.opts.Routers) > 0 && (!h.opts.RouterPorts || len(ports) > 0) {
		rule := networkingv1.NetworkPolicyIngressRule{}
		if h.opts.RouterPorts {
			for _, port := range ports {
				rule.Ports = append(rule.Ports, networkingv1.NetworkPolicyPort{
					Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(port))})
			}
		}
		for _, r := range h.opts.Routers {
			if r.CIDR != "" {
				rule.From = append(rule.From, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: r.CIDR}})
				continue
			}
			rule.From = append(rule.From, namespacePeer(r.Namespace, r.PodLabels))
		}
		p.Spec.Ingress = append(p.Spec.Ingress, rule)
	}
	return p
}

// namespacePeer selects the pods of the namespace named ns (by the label Kubernetes sets on
// every namespace), all of them or those with podLabels.
func namespacePeer(ns string, podLabels map[string]string) networkingv1.NetworkPolicyPeer {
	peer := networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
		MatchLabels: map[string]string{corev1.LabelMetadataName: ns},
	}}
	if len(podLabels) > 0 {
		peer.PodSelector = &metav1.LabelSelector{MatchLabels: podLabels}
	}
	return peer
}

func (h *NetworkPolicyHook) Shape(lrp *opi.LRP, meta *metav1.ObjectMeta, template *corev1.PodTemplateSpec) {
	if len(lrp.EgressRules) == 0 {
		return
	}
	meta.Annotations[names.AnnotationEgressRules] = objects.EgressAnnotation(lrp.EgressRules)
}

func (h *NetworkPolicyHook) Check(_ context.Context, lrp *opi.LRP) error {
	if !h.opts.Enabled {
		return nil
	}
	for i, r := range lrp.EgressRules {
		if r.Protocol == opi.ProtocolICMP {
			return fmt.Errorf("%w: egress_rules[%d]: icmp rules cannot be kept: Kubernetes NetworkPolicies filter tcp, udp and sctp only (a rule of protocol all allows icmp)", opi.ErrInvalid, i)
		}
	}
	return nil
}

func (h *NetworkPolicyHook) Desired(ctx context.Context, t Target) error {
	if !h.opts.Enabled || len(t.LRP.EgressRules) == 0 {
		return nil
	}
	_, err := EnsureOwned(ctx, h.client.NetworkingV1().NetworkPolicies(h.namespace), toEgressPolicy(t), t)
	return WrapErr(err, "create network policy")
}

func (h *NetworkPolicyHook) Missing(ctx context.Context, deployments []Workload) ([]Workload, error) {
	if !h.opts.Enabled {
		return nil, nil
	}
	have, err := apiclient.ListNames(ctx, AppSelector(), h.list(NetworkPoliciesResource))
	if err != nil {
		return nil, err
	}
	return Without(deployments, func(d Workload) bool {
		return d.EgressJSON() == "" || have[d.GetName()]
	}), nil
}

// toEgressPolicy is the LRP's egress policy: one egress rule per egress rule of the LRP.
func toEgressPolicy(t Target) *networkingv1.NetworkPolicy {
	p := &networkingv1.NetworkPolicy{}
	p.Name, p.Namespace, p.Labels = t.Name, t.Namespace, names.LRPLabels(t.LRP)
	p.Spec.PodSelector = metav1.LabelSelector{MatchLabels: names.SelectorLabels(t.LRP.LRPIdentifier)}
	p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	p.Spec.Egress = egressOf(t.LRP.EgressRules)
	return p
}

// egressOf is one NetworkPolicy egress rule per rule. icmp rules are left out: a policy cannot
// express them (check refuses them; an LRP desired while policies were off may hold one).
func egressOf(rules []opi.EgressRule) []networkingv1.NetworkPolicyEgressRule {
	var egress []networkingv1.NetworkPolicyEgressRule
	for _, r := range rules {
		if r.Protocol == opi.ProtocolICMP {
			continue
		}
		rule := networkingv1.NetworkPolicyEgressRule{}
		for _, cidr := range r.Destinations {
			rule.To = append(rule.To, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr}})
		}
		var protocol corev1.Protocol
		switch r.Protocol {
		case opi.ProtocolTCP:
			protocol = corev1.ProtocolTCP
		case opi.ProtocolUDP:
			protocol = corev1.ProtocolUDP
		default:
			// all: no ports, so every protocol and port.
			egress = append(egress, rule)
			continue
		}
		if len(r.Ports) == 0 {
			rule.Ports = []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(protocol)}}
		}
		for _, pr := range r.Ports {
			port := intstr.FromInt32(pr.Start)
			np := networkingv1.NetworkPolicyPort{Protocol: ptr.To(protocol), Port: &port}
			if pr.End > pr.Start {
				np.EndPort = ptr.To(pr.End)
			}
			rule.Ports = append(rule.Ports, np)
		}
		egress = append(egress, rule)
	}
	return egress
}

// TaskPolicy makes the task's egress policy exist, controlled by its Job (owner, live), when
// network policies are on and the task has rules: those of appRules (its app's LRP's, found
// says there is one), else the operator's default. It says what it did, for the log.
func (h *NetworkPolicyHook) TaskPolicy(ctx context.Context, task *opi.Task, name string, appRules []opi.EgressRule, found bool, owner metav1.OwnerReference, live func(context.Context) (bool, error)) (string, error) {
	if !h.opts.Enabled {
		return "off", nil
	}
	rules, from := appRules, "app"
	if !found {
		rules, from = h.opts.TaskDefaultEgress, "default"
	}
	egress := egressOf(rules)
	if len(egress) == 0 {
		return from + ": dns only", nil
	}
	p := &networkingv1.NetworkPolicy{}
	p.Name, p.Namespace, p.Labels = name, h.namespace, objects.TaskLabels(task)
	p.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{
		names.LabelSourceType: names.SourceTypeTask, names.LabelTaskGUID: names.LabelValue(task.GUID),
	}}
	p.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	p.Spec.Egress = egress
	_, err := EnsureOwned(ctx, h.client.NetworkingV1().NetworkPolicies(h.namespace), p, Target{Name: name, Namespace: h.namespace, Owner: owner, Live: live})
	return from, err
}
