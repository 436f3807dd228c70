package hooks_test

import (
	"context"
	"errors"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/janitor"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
	"github.com/opi-bridge/opi/testsupport/fakekube"
)

// gatewayActions describes the gateway client's actions, watches excluded.
func gatewayActions(gw *gatewayfake.Clientset) []string {
	var out []string
	for _, a := range gw.Actions() {
		if a.GetVerb() != "watch" {
			out = append(out, fakekube.Describe(a))
		}
	}
	return out
}

var _ = Describe("Hooks", func() {
	var (
		ctx    context.Context
		client *fake.Clientset
		lrp    *opi.LRP
		name   string
	)

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		lrp = backendtest.SampleLRP()
		name = names.DeploymentName(lrp)
	})

	owned := func(obj metav1.Object) {
		ExpectWithOffset(1, metav1.IsControlledBy(obj, backendtest.GetDeployment(client, name))).To(BeTrue(), "controlled by the deployment")
	}

	Describe("routing: ingress", func() {
		var backend *k8s.Backend
		BeforeEach(func() {
			backend = backendtest.StartBackendWith(client, k8s.Options{Hooks: hooks.Options{Routing: hooks.RoutingOptions{Mode: hooks.RoutingIngress, IngressClass: "nginx"}}})
			lrp.Routes = []opi.Route{
				{Hostname: "app.example.com", Port: 8080},
				{Hostname: "app.example.com/admin", Port: 9090},
				{Hostname: "other.example.com", Port: 8080},
			}
		})

		It("writes no Ingress on a desire or a route update: the leader's route objects are shared by the LRPs carrying a route", func() {
			before := len(client.Actions())
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, before), "create deployments "+name, []backendtest.Step{
				{"create secrets " + name + "-env"},
			}, []backendtest.Step{
				{"create services " + name},
				{"create poddisruptionbudgets " + name},
			})
			before = len(client.Actions())
			routes := []opi.Route{{Hostname: "new.example.com", Port: 8080}}
			Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Routes: &routes})).To(Succeed())
			Expect(backendtest.ActionsSince(client, before)).To(Equal([]string{"patch deployments " + name}))
		})

		It("leaves the Ingress alone on an update without routes", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			before := len(client.Actions())
			Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Instances: ptr.To(int32(5))})).To(Succeed())
			Expect(backendtest.ActionsSince(client, before)).To(Equal([]string{"create poddisruptionbudgets " + name, "patch deployments " + name}))
		})

		DescribeTable("refuses routes it cannot serve, before anything is written",
			func(route opi.Route, message string) {
				backendtest.ExpectRouteRefused(client, backend, lrp, route, message)
			},
			backendtest.UnservableRoutes,
		)

		It("refuses a route update it cannot serve, writing nothing", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			before := len(client.Actions())
			routes := []opi.Route{{Hostname: "x.example.com", Port: 1}}
			Expect(errors.Is(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Routes: &routes}), opi.ErrInvalid)).To(BeTrue())
			Expect(backendtest.ActionsSince(client, before)).To(BeEmpty())
		})

	})

	Describe("service", func() {
		It("gives a headless Service no cluster IP, and otherwise the same Service", func() {
			backend := backendtest.StartBackendWith(client, k8s.Options{Hooks: hooks.Options{HeadlessServices: true}})
			before := len(client.Actions())
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			Expect(backendtest.ActionsSince(client, before)).To(ContainElement("create services " + name))
			svc := backendtest.GetService(client, name)
			owned(svc)
			Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
			Expect(svc.Spec.Ports).To(HaveLen(2))
			Expect(svc.Spec.Selector).To(Equal(map[string]string{names.LabelGUID: lrp.GUID, names.LabelVersion: lrp.Version}))
		})
	})

	DescribeTable("Options.Validate checks the routing mode",
		func(routing hooks.RoutingOptions, message string) {
			err := k8s.Options{Hooks: hooks.Options{Routing: routing}}.Validate()
			if message == "" {
				Expect(err).NotTo(HaveOccurred())
				return
			}
			Expect(err).To(MatchError(ContainSubstring(message)))
		},
		Entry("none", hooks.RoutingOptions{}, ""),
		Entry("ingress", hooks.RoutingOptions{Mode: "ingress"}, ""),
		Entry("nats", hooks.RoutingOptions{Mode: "nats"}, ""),
		Entry("gateway with a name", hooks.RoutingOptions{Mode: "gateway", GatewayName: "cf"}, ""),
		Entry("gateway without a name", hooks.RoutingOptions{Mode: "gateway"}, "needs the gateway's name"),
		Entry("unknown", hooks.RoutingOptions{Mode: "istio"}, `routing "istio" is not one of`),
	)

	Describe("routing: gateway", func() {
		var (
			backend *k8s.Backend
			gw      *gatewayfake.Clientset
		)
		BeforeEach(func() {
			gw = gatewayfake.NewClientset()
			backend = backendtest.StartBackendWith(client, k8s.Options{
				Hooks:   hooks.Options{Routing: hooks.RoutingOptions{Mode: hooks.RoutingGateway, GatewayNamespace: "gateways", GatewayName: "cf"}},
				Clients: k8s.Clients{Gateway: gw},
			})
			Expect(gatewayActions(gw)).To(Equal([]string{"list httproutes"}), "start checks that HTTPRoutes are served")
			gw.ClearActions()
			lrp.Routes = []opi.Route{{Hostname: "app.example.com", Port: 8080}, {Hostname: "app.example.com/admin", Port: 9090}, {Hostname: "b.example.com", Port: 8080}}
		})

		It("writes no HTTPRoute on a desire or a route update: the leader's route objects are shared", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			routes := []opi.Route{{Hostname: "c.example.com", Port: 8080}}
			Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Routes: &routes})).To(Succeed())
			Expect(gatewayActions(gw)).To(BeEmpty())
		})

		It("refuses to start where the cluster does not serve HTTPRoutes", func() {
			missing := gatewayfake.NewClientset()
			missing.PrependReactor("list", "httproutes", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "gateway.networking.k8s.io", Resource: "httproutes"}, "")
			})
			b := backendtest.MustBackend(backendtest.NewClient(), lagertest.NewTestLogger("k8s"), k8s.Options{
				Namespace: backendtest.Namespace,
				Hooks:     hooks.Options{Routing: hooks.RoutingOptions{Mode: hooks.RoutingGateway, GatewayName: "cf"}},
				Clients:   k8s.Clients{Gateway: missing},
			})
			startCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			Expect(b.Start(startCtx)).To(MatchError(ContainSubstring("needs the Gateway API's HTTPRoute")))
		})

	})

	Describe("network policies", func() {
		var backend *k8s.Backend
		opts := k8s.Options{
			Hooks: hooks.Options{NetworkPolicy: hooks.NetworkPolicyOptions{
				Enabled:      true,
				Routers:      []hooks.PolicyPeer{{Namespace: "ingress-nginx", PodLabels: map[string]string{"app": "ingress"}}},
				DNSNamespace: "kube-system",
			}},
			Janitor: janitor.Options{Grace: time.Minute},
		}
		JustBeforeEach(func() {
			backend = backendtest.StartBackendWith(client, opts)
		})

		// The baseline's and the routers' exact policies: task_networkpolicy_test.go.

		Context("when a baseline of another configuration exists", func() {
			BeforeEach(func() {
				old := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: hooks.BaselinePolicyName, Namespace: backendtest.Namespace}}
				old.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
				client = backendtest.NewClient(old)
			})
			It("rewrites it when it starts", func() {
				Expect(backendtest.ActionsSince(client, 0)).To(ContainElement("update networkpolicies " + hooks.BaselinePolicyName))
				p, err := client.NetworkingV1().NetworkPolicies(backendtest.Namespace).Get(ctx, hooks.BaselinePolicyName, metav1.GetOptions{})
				Expect(err).NotTo(HaveOccurred())
				Expect(p.Spec.PolicyTypes).To(HaveLen(2))
				Expect(p.Spec.Egress).To(HaveLen(1), "DNS")
			})
		})

		It("gives an LRP without egress rules no policy of its own", func() {
			before := len(client.Actions())
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			Expect(backendtest.ActionsSince(client, before)).NotTo(ContainElement(HavePrefix("create networkpolicies")))
		})

		It("gives an LRP with egress rules a policy of exactly them, owned by the Deployment", func() {
			lrp.EgressRules = []opi.EgressRule{
				{Protocol: "tcp", Destinations: []string{"10.0.0.0/8"}, Ports: []opi.PortRange{{Start: 443, End: 443}, {Start: 8000, End: 8080}}},
				{Protocol: "udp", Destinations: []string{"1.1.1.1/32"}},
				{Protocol: "all", Destinations: []string{"192.168.0.0/16", "2001:db8::/32"}},
			}
			before := len(client.Actions())
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, before), "create deployments "+name, []backendtest.Step{
				{"create secrets " + name + "-env"},
			}, []backendtest.Step{
				{"create services " + name},
				{"create networkpolicies " + name},
				{"create poddisruptionbudgets " + name},
			})
			p, err := client.NetworkingV1().NetworkPolicies(backendtest.Namespace).Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			owned(p)
			p443, p8000 := intstr.FromInt32(443), intstr.FromInt32(8000)
			block := func(cidr string) networkingv1.NetworkPolicyPeer {
				return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr}}
			}
			Expect(p.Spec).To(Equal(networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{names.LabelGUID: lrp.GUID, names.LabelVersion: lrp.Version}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Egress: []networkingv1.NetworkPolicyEgressRule{
					{To: []networkingv1.NetworkPolicyPeer{block("10.0.0.0/8")}, Ports: []networkingv1.NetworkPolicyPort{
						{Protocol: ptr.To(corev1.ProtocolTCP), Port: &p443},
						{Protocol: ptr.To(corev1.ProtocolTCP), Port: &p8000, EndPort: ptr.To(int32(8080))},
					}},
					{To: []networkingv1.NetworkPolicyPeer{block("1.1.1.1/32")}, Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP)}}},
					{To: []networkingv1.NetworkPolicyPeer{block("192.168.0.0/16"), block("2001:db8::/32")}},
				},
			}))
			Expect(backendtest.GetDeployment(client, name).Annotations).To(HaveKey(names.AnnotationEgressRules))
		})

		It("refuses an icmp rule, writing nothing", func() {
			lrp.EgressRules = []opi.EgressRule{{Protocol: "icmp", Destinations: []string{"0.0.0.0/0"}, ICMPType: -1, ICMPCode: -1}}
			before := len(client.Actions())
			err := backend.DesireLRP(ctx, lrp)
			Expect(errors.Is(err, opi.ErrInvalid)).To(BeTrue())
			Expect(err.Error()).To(ContainSubstring("icmp"))
			Expect(backendtest.ActionsSince(client, before)).To(BeEmpty())
		})

		It("has the janitor rebuild a missing policy from the Deployment", func() {
			b := backend
			lrp.EgressRules = []opi.EgressRule{{Protocol: "all", Destinations: []string{"10.0.0.0/8"}}}
			Expect(b.DesireLRP(ctx, lrp)).To(Succeed())
			want, err := client.NetworkingV1().NetworkPolicies(backendtest.Namespace).Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(client.NetworkingV1().NetworkPolicies(backendtest.Namespace).Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
			b.Sweep(ctx)
			got, err := client.NetworkingV1().NetworkPolicies(backendtest.Namespace).Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(got.Spec).To(Equal(want.Spec))
		})
	})

	Describe("placement", func() {
		It("puts an LRP with a placement tag on its segment's nodes and tolerates their taint", func() {
			backend := backendtest.StartBackendWith(client, k8s.Options{Hooks: hooks.Options{Placement: hooks.PlacementOptions{NodeLabel: "seg", TaintKey: "seg-taint"}}})
			lrp.PlacementTags = []string{"iso-1"}
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			d := backendtest.GetDeployment(client, name)
			spec := d.Spec.Template.Spec
			Expect(spec.NodeSelector).To(Equal(map[string]string{"seg": "iso-1"}))
			Expect(d.Spec.Template.Labels).To(HaveKeyWithValue(hooks.LabelPlacementTag, "iso-1"))
			Expect(d.Labels).NotTo(HaveKey(hooks.LabelPlacementTag), "only the pods carry it")
			got, err := backend.GetLRP(ctx, lrp.LRPIdentifier)
			Expect(err).NotTo(HaveOccurred())
			Expect(got.UserDefinedAnnotations).To(Equal(lrp.UserDefinedAnnotations))
			Expect(spec.Tolerations).To(Equal([]corev1.Toleration{{Key: "seg-taint", Operator: corev1.TolerationOpEqual, Value: "iso-1", Effect: corev1.TaintEffectNoSchedule}}))
		})

		It("uses the default label and no toleration without a taint key, and nothing without tags", func() {
			backend := backendtest.StartBackendWith(client, k8s.Options{})
			lrp.PlacementTags = []string{"iso-1"}
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			pod := backendtest.GetDeployment(client, name).Spec.Template.Spec
			Expect(pod.NodeSelector).To(Equal(map[string]string{hooks.DefaultPlacementKey: "iso-1"}))
			Expect(pod.Tolerations).To(BeEmpty())

			plain := backendtest.SampleLRP()
			plain.Version = "plain"
			Expect(backend.DesireLRP(ctx, plain)).To(Succeed())
			Expect(backendtest.GetDeployment(client, names.DeploymentName(plain)).Spec.Template.Spec.NodeSelector).To(BeEmpty())
		})

		It("reads an instance its segment cannot place as UNCLAIMED with Diego's placement tag error", func() {
			backend := backendtest.StartBackendWith(client, k8s.Options{})
			lrp.PlacementTags = []string{"iso-1"}
			lrp.Instances = 1
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			pod := backendtest.NewPod(lrp, "pod", time.Now(), corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
				Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
				Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.",
			}}})
			pod.Labels[names.LabelPlacementTag] = "iso-1"
			backendtest.CreatePod(client, pod)
			Eventually(func() []*opi.Instance {
				got, err := backend.GetInstances(ctx, lrp.LRPIdentifier)
				Expect(err).NotTo(HaveOccurred())
				return got
			}).Should(ConsistOf(HaveField("PlacementError", `found no compatible cell with placement tag "iso-1"`)))
		})

		It("refuses two segments, writing nothing", func() {
			backend := backendtest.StartBackendWith(client, k8s.Options{})
			lrp.PlacementTags = []string{"a", "b"}
			before := len(client.Actions())
			Expect(errors.Is(backend.DesireLRP(ctx, lrp), opi.ErrInvalid)).To(BeTrue())
			Expect(backendtest.ActionsSince(client, before)).To(BeEmpty())
		})
	})

	Describe("volume mounts", func() {
		var backend *k8s.Backend
		BeforeEach(func() {
			claim := func(name string, labels map[string]string) *corev1.PersistentVolumeClaim {
				return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: backendtest.Namespace, Labels: labels}}
			}
			client = backendtest.NewClient(
				claim("vol-guid-1", map[string]string{hooks.LabelClaimSpaceGUID: lrp.SpaceGUID}),
				claim("unlabelled", nil),
				claim("other-space", map[string]string{hooks.LabelClaimSpaceGUID: "another-space-guid"}),
				claim("empty-space", map[string]string{hooks.LabelClaimSpaceGUID: ""}),
			)
			backend = backendtest.StartBackendWith(client, k8s.Options{})
		})

		It("mounts the claim the volume id names at mount_dir", func() {
			lrp.VolumeMounts = []opi.VolumeMount{{VolumeID: "vol-guid-1", MountDir: "/var/data"}}
			before := len(client.Actions())
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			Expect(backendtest.ActionsSince(client, before)[0]).To(Equal("get persistentvolumeclaims vol-guid-1"))
			spec := backendtest.GetDeployment(client, name).Spec.Template.Spec
			Expect(spec.Volumes).To(Equal([]corev1.Volume{{Name: "vol-0", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "vol-guid-1"},
			}}}))
			Expect(spec.Containers[0].VolumeMounts).To(Equal([]corev1.VolumeMount{{Name: "vol-0", MountPath: "/var/data"}}))
		})

		DescribeTable("refuses a mount it cannot serve, writing nothing",
			func(id, message string) {
				lrp.VolumeMounts = []opi.VolumeMount{{VolumeID: id, MountDir: "/var/data"}}
				before := len(client.Actions())
				err := backend.DesireLRP(ctx, lrp)
				Expect(errors.Is(err, opi.ErrInvalid)).To(BeTrue())
				Expect(err.Error()).To(ContainSubstring(message))
				for _, a := range backendtest.ActionsSince(client, before) {
					Expect(a).To(HavePrefix("get "))
				}
			},
			Entry("no such claim", "missing-claim", `no PersistentVolumeClaim "missing-claim"`),
			Entry("an id that cannot name a claim", "Vol_1", "cannot name a PersistentVolumeClaim"),
			Entry("a claim without the space label", "unlabelled", `PersistentVolumeClaim "unlabelled" is not labelled opi-bridge.io/space-guid="`),
			Entry("a claim of another space", "other-space", `PersistentVolumeClaim "other-space" is not labelled opi-bridge.io/space-guid=`),
			Entry("a claim with an empty space label", "empty-space", `PersistentVolumeClaim "empty-space" is not labelled`),
		)

		It("refuses every claim to an LRP without a space guid", func() {
			client = backendtest.NewClient(&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "blank", Namespace: backendtest.Namespace, Labels: map[string]string{hooks.LabelClaimSpaceGUID: ""}}})
			backend = backendtest.StartBackendWith(client, k8s.Options{})
			lrp.SpaceGUID = ""
			lrp.VolumeMounts = []opi.VolumeMount{{VolumeID: "blank", MountDir: "/var/data"}}
			Expect(backend.DesireLRP(ctx, lrp)).To(MatchError(opi.ErrInvalid))
			list, err := client.AppsV1().Deployments(backendtest.Namespace).List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(list.Items).To(BeEmpty())
		})
	})
})
