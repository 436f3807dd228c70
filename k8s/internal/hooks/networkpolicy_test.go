package hooks_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/names"
)

var _ = Describe("The routers' network policy", func() {
	It("lets in an address range as an ipBlock and a namespace's pods as before", func() {
		ctx := context.Background()
		client := fake.NewClientset()
		opts := hooks.NetworkPolicyOptions{Enabled: true, Routers: []hooks.PolicyPeer{
			{CIDR: "10.0.16.0/24"},
			{Namespace: "ingress-nginx", PodLabels: map[string]string{"app": "nginx"}},
		}}
		h := hooks.NewNetworkPolicy(client, hooks.NewMetadataLists(nil, client, nil, namespace), namespace, opts)
		Expect(h.Start(ctx)).To(Succeed())

		p, err := client.NetworkingV1().NetworkPolicies(namespace).Get(ctx, hooks.RoutersPolicyName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(p.Spec).To(Equal(networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{names.LabelSourceType: names.SourceTypeApp}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
				{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.16.0/24"}},
				{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "ingress-nginx"}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}},
				},
			}}},
		}))
	})

	It("with RouterPorts, admits the routers on the ports the leader hands it and on no other, rewritten only when they change", func() {
		ctx := context.Background()
		client := fake.NewClientset()
		opts := hooks.NetworkPolicyOptions{Enabled: true, RouterPorts: true, Routers: []hooks.PolicyPeer{{CIDR: "10.0.16.0/24"}}}
		h := hooks.NewNetworkPolicy(client, hooks.NewMetadataLists(nil, client, nil, namespace), namespace, opts)
		routers := func() networkingv1.NetworkPolicySpec {
			p, err := client.NetworkingV1().NetworkPolicies(namespace).Get(ctx, hooks.RoutersPolicyName, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return p.Spec
		}
		// A create of what exists is refused by the API server and changes nothing: the
		// rewrites are the updates.
		writes := func() []string {
			var out []string
			for _, a := range client.Actions() {
				if a.GetVerb() == "update" {
					out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
				}
			}
			return out
		}
		base := networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{names.LabelSourceType: names.SourceTypeApp}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{},
		}
		Expect(h.Start(ctx)).To(Succeed())
		Expect(routers()).To(Equal(base), "nothing admitted before the leader says which ports")

		Expect(h.SetRouterPorts(ctx, []int32{8080, 9090})).To(Succeed())
		want := *base.DeepCopy()
		want.Ingress = []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.16.0/24"}}},
			Ports: []networkingv1.NetworkPolicyPort{
				{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(8080))},
				{Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(intstr.FromInt32(9090))},
			},
		}}
		Expect(routers()).To(Equal(want))

		By("a replica starting leaves the leader's ports alone; the same ports again write nothing")
		before := len(writes())
		Expect(h.Start(ctx)).To(Succeed())
		Expect(h.SetRouterPorts(ctx, []int32{8080, 9090})).To(Succeed())
		Expect(routers()).To(Equal(want))
		Expect(writes()[before:]).To(BeEmpty())

		By("no port left: nothing admitted")
		Expect(h.SetRouterPorts(ctx, nil)).To(Succeed())
		Expect(routers()).To(Equal(base))
	})

	DescribeTable("Options.Validate refuses a router it cannot express",
		func(peer hooks.PolicyPeer, message string) {
			err := hooks.Options{NetworkPolicy: hooks.NetworkPolicyOptions{Routers: []hooks.PolicyPeer{{Namespace: "ok"}, peer}}}.Validate()
			if message == "" {
				Expect(err).NotTo(HaveOccurred())
				return
			}
			Expect(err).To(MatchError(message))
		},
		Entry("a cidr", hooks.PolicyPeer{CIDR: "10.0.16.0/24"}, ""),
		Entry("an IPv6 cidr", hooks.PolicyPeer{CIDR: "fd00::/64"}, ""),
		Entry("an address without a length", hooks.PolicyPeer{CIDR: "10.0.16.1"}, `routers[1]: router cidr "10.0.16.1" is not an address range like 10.0.16.0/24`),
		Entry("a cidr with a namespace", hooks.PolicyPeer{CIDR: "10.0.16.0/24", Namespace: "x"}, "routers[1]: router 10.0.16.0/24: a cidr goes without a namespace and pod labels"),
		Entry("neither", hooks.PolicyPeer{}, "routers[1]: a router needs a namespace or a cidr"),
	)
})
