package integration_test

import (
	"context"
	"encoding/json"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/testsupport/fixture"
)

// kubectlJSON runs kubectl get ... -o json and decodes what it printed into out.
func kubectlJSON(out any, args ...string) {
	ExpectWithOffset(1, json.Unmarshal([]byte(kubectl(append(args, "-o", "json")...)), out)).To(Succeed())
}

// ingressHosts is host → "path→port" of the app's routes through the Ingresses opi keeps (see
// routedTo).
func ingressHosts(ns string, a *app) map[string][]string { return routedTo(ns, a, "ingresses") }

func itoa(n int32) string { b, _ := json.Marshal(n); return string(b) }

func updateRoutes(o *opiServer, a *app, routes string) {
	update := map[string]any{"annotation": "1700000000.5", "routes": map[string]any{"cf-router": json.RawMessage(routes)}}
	status, body := o.call("POST", "/apps/"+a.processGUID(), fixture.UpdateLRP(a.guid, a.version, update).JSON())
	ExpectWithOffset(1, status).To(Equal(http.StatusOK), body)
}

func stop(o *opiServer, a *app) {
	status, body := o.call("PUT", a.path()+"/stop", "")
	ExpectWithOffset(1, status).To(Equal(http.StatusOK), body)
}

var _ = Describe("Routing, isolation and placement hooks", func() {
	var (
		ns string
		a  *app
	)

	BeforeEach(func() {
		ns = newNamespace()
		a = newApp()
		a.instances = 1
	})

	It("routes with one Ingress per hostname of a space, owned by no app: after desire, after a route update, gone after stop; other apps untouched", func() {
		o := startOpi(ns, "--routing", "ingress", "--ingress-class", "nginx")
		other := newApp()
		other.instances = 1
		other.extra = map[string]any{"routes": map[string]any{"cf-router": []any{map[string]any{"hostname": "other.example.com", "port": 8080}}}}
		desire(o, other)
		desire(o, a)

		Eventually(func() map[string][]string { return ingressHosts(ns, a) }).Should(Equal(map[string][]string{"dora.example.com": {"/→8080"}}))
		var ing networkingv1.IngressList
		kubectlJSON(&ing, "get", "ingresses", "-n", ns, "-l", names.RouteSelector)
		Expect(ing.Items).To(HaveLen(2))
		for _, i := range ing.Items {
			Expect(*i.Spec.IngressClassName).To(Equal("nginx"))
			Expect(i.OwnerReferences).To(BeEmpty(), "a route is shared by every LRP of the space carrying it")
		}

		updateRoutes(o, a, `[{"hostname":"new.example.com","port":8080},{"hostname":"new.example.com/api","port":8080},{"hostnames":["b.example.com"],"port":8080}]`)
		Eventually(func() map[string][]string { return ingressHosts(ns, a) }).Should(Equal(map[string][]string{
			"new.example.com": {"/api→8080", "/→8080"},
			"b.example.com":   {"/→8080"},
		}))
		Expect(ingressHosts(ns, other)).To(HaveKey("other.example.com"), "the other app keeps its route")

		stop(o, a)
		Eventually(func() map[string][]string { return ingressHosts(ns, a) }).Should(BeEmpty())
		Eventually(func() []routeObject { return routeObjects(ns, "ingresses") }).Should(ConsistOf(HaveField("Host", "other.example.com")))
		Expect(ingressHosts(ns, other)).To(HaveLen(1))
	})

	It("has the leader put back a route's Ingress and the janitor an egress policy deleted behind opi's back", func() {
		o := startOpi(ns, "--janitor-period", "1s", "--janitor-grace", "2s", "--leader-election=false")
		a.extra = map[string]any{"egress_rules": []any{map[string]any{"protocol": "all", "destinations": []any{"10.0.0.0/8"}}}}
		desire(o, a)
		name := workloads(ns, a)[0].Name
		Eventually(func() map[string][]string { return ingressHosts(ns, a) }).Should(HaveKey("dora.example.com"))
		kubectl("delete", "ingress", routeObjects(ns, "ingresses")[0].Name, "-n", ns)
		kubectl("delete", "networkpolicy", name, "-n", ns)
		Eventually(func() map[string][]string { return ingressHosts(ns, a) }).Should(HaveKey("dora.example.com"))
		Eventually(func() []networkingv1.NetworkPolicy {
			var list networkingv1.NetworkPolicyList
			kubectlJSON(&list, "get", "networkpolicies", "-n", ns, "-l", selector(a))
			return list.Items
		}).Should(ConsistOf(HaveField("Spec.Egress", HaveLen(1))))
	})

	It("routes with one HTTPRoute per hostname of a space attached to the operator's Gateway: after desire, after a route update, gone after stop", func() {
		o := startOpi(ns, "--routing", "gateway", "--gateway-namespace", "gateways", "--gateway-name", "cf")
		desire(o, a)
		hosts := func() map[string][]string {
			var list gatewayv1.HTTPRouteList
			kubectlJSON(&list, "get", "httproutes", "-n", ns, "-l", names.RouteSelector)
			for _, r := range list.Items {
				ExpectWithOffset(1, r.Spec.ParentRefs).To(ConsistOf(And(HaveField("Name", gatewayv1.ObjectName("cf")), HaveField("Namespace", HaveValue(BeEquivalentTo("gateways"))))))
				ExpectWithOffset(1, r.OwnerReferences).To(BeEmpty())
			}
			return routedTo(ns, a, "httproutes")
		}
		Eventually(hosts).Should(Equal(map[string][]string{"dora.example.com": {"/→8080"}}))

		updateRoutes(o, a, `[{"hostname":"a.example.com","port":8080},{"hostname":"b.example.com","port":8080}]`)
		Eventually(hosts).Should(Equal(map[string][]string{"a.example.com": {"/→8080"}, "b.example.com": {"/→8080"}}))

		stop(o, a)
		Eventually(func() []routeObject { return routeObjects(ns, "httproutes") }).Should(BeEmpty())
	})

	It("isolates apps with NetworkPolicies: a baseline for all, the routers' ingress, an egress policy for an app with egress rules", func() {
		o := startOpi(ns, "--router", "ingress-nginx:app=ingress")
		plain := newApp()
		plain.instances = 1
		desire(o, plain)
		a.extra = map[string]any{"egress_rules": []any{
			map[string]any{"protocol": "tcp", "destinations": []any{"10.0.0.1-10.0.0.6"}, "ports": []any{443}},
			map[string]any{"protocol": "udp", "destinations": []any{"8.8.8.8"}, "portRange": map[string]any{"start": 53, "end": 54}},
			map[string]any{"protocol": "all", "destinations": []any{"192.168.0.0/16"}},
		}}
		desire(o, a)

		var baseline, routers networkingv1.NetworkPolicy
		kubectlJSON(&baseline, "get", "networkpolicy", "opi-apps", "-n", ns)
		Expect(baseline.Spec.PodSelector.MatchExpressions).To(ConsistOf(metav1.LabelSelectorRequirement{
			Key: "opi-bridge.io/source-type", Operator: metav1.LabelSelectorOpIn, Values: []string{"APP", "TASK"},
		}))
		Expect(baseline.Spec.Ingress).To(BeEmpty())
		Expect(baseline.Spec.Egress).To(HaveLen(1), "DNS only")
		kubectlJSON(&routers, "get", "networkpolicy", "opi-apps-routers", "-n", ns)
		Expect(routers.Spec.PodSelector.MatchLabels).To(Equal(map[string]string{"opi-bridge.io/source-type": "APP"}))
		Expect(routers.Spec.Ingress).To(HaveLen(1))
		Expect(routers.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels).To(Equal(map[string]string{"kubernetes.io/metadata.name": "ingress-nginx"}))
		Expect(routers.Spec.Ingress[0].From[0].PodSelector.MatchLabels).To(Equal(map[string]string{"app": "ingress"}))

		var mine networkingv1.NetworkPolicyList
		kubectlJSON(&mine, "get", "networkpolicies", "-n", ns, "-l", selector(plain))
		Expect(mine.Items).To(BeEmpty(), "an app without egress rules has no policy of its own")

		kubectlJSON(&mine, "get", "networkpolicies", "-n", ns, "-l", selector(a))
		Expect(mine.Items).To(HaveLen(1))
		egress := mine.Items[0].Spec.Egress
		Expect(egress).To(HaveLen(3))
		var cidrs []string
		for _, to := range egress[0].To {
			cidrs = append(cidrs, to.IPBlock.CIDR)
		}
		Expect(cidrs).To(Equal([]string{"10.0.0.1/32", "10.0.0.2/31", "10.0.0.4/31", "10.0.0.6/32"}))
		Expect(egress[0].Ports[0].Port.IntValue()).To(Equal(443))
		Expect(*egress[1].Ports[0].Protocol).To(Equal(corev1.ProtocolUDP))
		Expect(*egress[1].Ports[0].EndPort).To(BeEquivalentTo(54))
		Expect(egress[2].Ports).To(BeEmpty(), "all: every protocol and port")
		Expect(mine.Items[0].OwnerReferences).To(ConsistOf(HaveField("Name", workloads(ns, a)[0].Name)))
	})

	It("refuses an icmp egress rule with a 400 and writes nothing", func() {
		o := startOpi(ns)
		a.extra = map[string]any{"egress_rules": []any{map[string]any{"protocol": "icmp", "destinations": []any{"0.0.0.0/0"}, "icmp_info": map[string]any{"type": 0, "code": 0}}}}
		status, body := o.call("PUT", "/apps/"+a.processGUID(), a.body())
		Expect(status).To(Equal(http.StatusBadRequest))
		Expect(body).To(ContainSubstring("icmp"))
		Expect(leftObjects(ns, a)).To(BeEmpty())
	})

	It("places an app of an isolation segment on its nodes: node selector and toleration, UNCLAIMED while the segment has none", func() {
		o := startOpi(ns)
		a.extra = map[string]any{"placement_tags": []string{"iso-1"}}
		desire(o, a)
		spec := workloads(ns, a)[0].Spec.Template.Spec
		Expect(spec.NodeSelector).To(Equal(map[string]string{"cloudfoundry.org/isolation-segment": "iso-1"}))
		Expect(spec.Tolerations).To(ContainElement(corev1.Toleration{Key: "cloudfoundry.org/isolation-segment", Operator: corev1.TolerationOpEqual, Value: "iso-1", Effect: corev1.TaintEffectNoSchedule}))
		Eventually(func() []models.Instance { return instances(o, a).Instances }).Should(ConsistOf(
			And(HaveField("State", "UNCLAIMED"), HaveField("PlacementError", `found no compatible cell with placement tag "iso-1"`))))
	})

	It("mounts the claim a volume id names when it carries the app's space guid, and refuses a mount whose claim does not exist or belongs to another space", func() {
		o := startOpi(ns)
		for name, space := range map[string]string{"vol-1": "space-1", "vol-2": "space-2"} {
			claim := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"opi-bridge.io/space-guid": space}},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}
			_, err := kube.CoreV1().PersistentVolumeClaims(ns).Create(context.Background(), claim, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}

		a.extra = map[string]any{"volume_mounts": []any{map[string]any{"volume_id": "vol-1", "mount_dir": "/var/vcap/data/vol"}}}
		desire(o, a)
		spec := workloads(ns, a)[0].Spec.Template.Spec
		Expect(spec.Volumes).To(ConsistOf(HaveField("VolumeSource.PersistentVolumeClaim.ClaimName", "vol-1")))
		Expect(spec.Containers[0].VolumeMounts).To(ConsistOf(HaveField("MountPath", "/var/vcap/data/vol")))

		missing := newApp()
		missing.extra = map[string]any{"volume_mounts": []any{map[string]any{"volume_id": "no-such-claim", "mount_dir": "/data"}}}
		status, body := o.call("PUT", "/apps/"+missing.processGUID(), missing.body())
		Expect(status).To(Equal(http.StatusBadRequest))
		Expect(body).To(ContainSubstring(`no PersistentVolumeClaim \"no-such-claim\"`))
		Expect(leftObjects(ns, missing)).To(BeEmpty())

		// fixture.DesireLRP's space guid is space-1.
		other := newApp()
		other.extra = map[string]any{"volume_mounts": []any{map[string]any{"volume_id": "vol-2", "mount_dir": "/data"}}}
		status, body = o.call("PUT", "/apps/"+other.processGUID(), other.body())
		Expect(status).To(Equal(http.StatusBadRequest))
		Expect(body).To(ContainSubstring(`PersistentVolumeClaim \"vol-2\" is not labelled opi-bridge.io/space-guid=\"space-1\"`))
		Expect(leftObjects(ns, other)).To(BeEmpty())
	})
})
