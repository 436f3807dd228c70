package routeobjects_test

import (
	"context"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// endpoint is one instance a route's objects send a path to: pod IP and the LRP's port.
type endpoint struct {
	IP   string
	Port int32
}

var _ = Describe("Route objects", func() {
	var (
		ctx    context.Context
		client *fake.Clientset
		a, b   *opi.LRP
		key    string
	)

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		a = backendtest.SampleLRP()
		a.Routes = []opi.Route{{Hostname: "app.example.com", Port: 8080}, {Hostname: "app.example.com/admin", Port: 9090}}
		// The new web process of a rolling deploy: a new guid of the same app, the same routes,
		// listening elsewhere.
		b = backendtest.SampleLRP()
		b.GUID, b.Version = "0b9e3c1a-5555-6666-7777-888899990000", "v1"
		b.Ports = []int32{7070, 9090}
		b.Routes = []opi.Route{{Hostname: "app.example.com", Port: 7070}, {Hostname: "App.Example.com/admin", Port: 9090}}
		key = names.RouteKey(a.SpaceGUID, "app.example.com")
	})

	newPod := func(lrp *opi.LRP, name, ip string, ready corev1.ConditionStatus) {
		t0 := time.Now().Add(-time.Minute)
		pod := backendtest.NewPod(lrp, name, t0, corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.NewTime(t0)}},
		})
		pod.UID = types.UID("uid-" + name)
		pod.Spec.NodeName = "node-1"
		backendtest.CreatePod(client, pod)
	}
	readyPod := func(lrp *opi.LRP, name, ip string) { newPod(lrp, name, ip, corev1.ConditionTrue) }
	setReady := func(name string, ready bool) {
		pod, err := client.CoreV1().Pods(backendtest.Namespace).Get(ctx, name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		pod.Status.Conditions[0].Status = status
		_, err = client.CoreV1().Pods(backendtest.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}

	services := func() map[string]corev1.Service {
		list, err := client.CoreV1().Services(backendtest.Namespace).List(ctx, metav1.ListOptions{LabelSelector: names.RouteSelector})
		Expect(err).NotTo(HaveOccurred())
		out := map[string]corev1.Service{}
		for _, s := range list.Items {
			out[s.Annotations[names.AnnotationRoutePath]] = s
		}
		return out
	}
	// served are the endpoints the route objects give each path of key's hostname, by path.
	served := func(paths map[string]string) map[string][]endpoint {
		list, err := client.DiscoveryV1().EndpointSlices(backendtest.Namespace).List(ctx, metav1.ListOptions{LabelSelector: names.RouteSelector})
		Expect(err).NotTo(HaveOccurred())
		out := map[string][]endpoint{}
		for path, service := range paths {
			out[path] = []endpoint{}
			for _, s := range list.Items {
				if s.Labels[discoveryv1.LabelServiceName] != service {
					continue
				}
				for _, e := range s.Endpoints {
					Expect(*e.Conditions.Ready).To(BeTrue())
					out[path] = append(out[path], endpoint{e.Addresses[0], *s.Ports[0].Port})
				}
			}
			slices.SortFunc(out[path], func(x, y endpoint) int { return cmpString(x.IP, y.IP) })
		}
		return out
	}
	ingressPaths := func() map[string]string {
		list, err := client.NetworkingV1().Ingresses(backendtest.Namespace).List(ctx, metav1.ListOptions{LabelSelector: names.RouteSelector})
		Expect(err).NotTo(HaveOccurred())
		if len(list.Items) == 0 {
			return nil
		}
		Expect(list.Items).To(HaveLen(1))
		out := map[string]string{}
		for _, p := range list.Items[0].Spec.Rules[0].HTTP.Paths {
			out[p.Path] = p.Backend.Service.Name
		}
		return out
	}
	ingressServed := func() map[string][]endpoint { return served(ingressPaths()) }
	// quiet waits until the controller has stopped writing: no call for 300 ms (a sync that
	// found its cache behind and retries included).
	quiet := func() {
		GinkgoHelper()
		Eventually(func() int {
			n := len(client.Actions())
			time.Sleep(300 * time.Millisecond)
			return len(client.Actions()) - n
		}, "10s").Should(BeZero())
	}

	Describe("in ingress mode", func() {
		var backend *k8s.Backend
		BeforeEach(func() {
			backend = backendtest.StartBackendWith(client, k8s.Options{Hooks: hooks.Options{Routing: hooks.RoutingOptions{Mode: hooks.RoutingIngress, IngressClass: "nginx"}}})
		})
		lead := func() func() { return backendtest.Lead(backend.RunLeaderWork) }

		It("makes one Ingress per hostname of a space, a selector-less Service per path, and each LRP's Ready instances on its own port", func() {
			Expect(backend.DesireLRP(ctx, a)).To(Succeed())
			Expect(backend.DesireLRP(ctx, b)).To(Succeed())
			readyPod(a, "a-0", "10.0.0.1")
			readyPod(a, "a-1", "10.0.0.2")
			readyPod(b, "b-0", "10.0.1.1")
			newPod(b, "b-1", "10.0.1.2", corev1.ConditionFalse)
			lead()

			Eventually(ingressServed).Should(Equal(map[string][]endpoint{
				"/":      {{"10.0.0.1", 8080}, {"10.0.0.2", 8080}, {"10.0.1.1", 7070}},
				"/admin": {{"10.0.0.1", 9090}, {"10.0.0.2", 9090}, {"10.0.1.1", 9090}},
			}))
			ing, err := client.NetworkingV1().Ingresses(backendtest.Namespace).Get(ctx, names.RouteObjectName(key), metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(ing.OwnerReferences).To(BeEmpty(), "the route belongs to no LRP")
			Expect(ing.Labels).To(Equal(map[string]string{names.LabelSourceType: names.SourceTypeRoute, names.LabelRouteKey: key, names.LabelManagedBy: names.ManagedByOPI}))
			Expect(ing.Annotations).To(Equal(map[string]string{names.AnnotationSpaceGUID: a.SpaceGUID, names.AnnotationRouteHost: "app.example.com"}))
			Expect(ing.Spec.IngressClassName).To(Equal(ptr.To("nginx")))
			Expect(ing.Spec.Rules).To(HaveLen(1))
			Expect(ing.Spec.Rules[0].Host).To(Equal("app.example.com"))
			Expect(ing.Spec.Rules[0].HTTP.Paths).To(Equal([]networkingv1.HTTPIngressPath{
				ingressPath("/", names.RouteServiceName(key, "/")),
				ingressPath("/admin", names.RouteServiceName(key, "/admin")),
			}))
			svc := services()["/"]
			Expect(svc.Name).To(Equal(names.RouteServiceName(key, "/")))
			Expect(svc.Spec.Selector).To(BeEmpty(), "its endpoints are opi's")
			Expect(svc.Spec.ClusterIP).To(BeEmpty(), "a cluster IP, as the LRPs' own Services without headless_services")
			Expect(svc.Spec.Ports).To(HaveExactElements(HaveField("Port", int32(8080))))

			list, err := client.DiscoveryV1().EndpointSlices(backendtest.Namespace).List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(list.Items).To(HaveLen(4), "one per LRP and path")
			for _, s := range list.Items {
				Expect(s.Labels).To(HaveKeyWithValue(discoveryv1.LabelManagedBy, names.EndpointSliceManager))
				Expect(s.OwnerReferences).To(HaveExactElements(HaveField("Name", s.Labels[discoveryv1.LabelServiceName])))
				Expect(s.Endpoints).To(HaveEach(HaveField("TargetRef.Kind", "Pod")))
			}

			By("no pod template carries a route label: instances are never restarted for a route")
			Expect(backendtest.GetDeployment(client, names.DeploymentName(a)).Spec.Template.Labels).NotTo(HaveKey(names.LabelRouteKey))
		})

		It("moves traffic instance by instance through CC's rolling deploy, and the route goes only with its last LRP", func() {
			lead()
			Expect(backend.DesireLRP(ctx, a)).To(Succeed())
			readyPod(a, "a-0", "10.0.0.1")
			readyPod(a, "a-1", "10.0.0.2")
			Eventually(ingressServed).Should(HaveKeyWithValue("/", []endpoint{{"10.0.0.1", 8080}, {"10.0.0.2", 8080}}))

			By("B desired with A's routes, before its instance is Ready: the route keeps serving A")
			Expect(backend.DesireLRP(ctx, b)).To(Succeed())
			newPod(b, "b-0", "10.0.1.1", corev1.ConditionFalse)
			Consistently(ingressServed, "300ms").Should(HaveKeyWithValue("/", []endpoint{{"10.0.0.1", 8080}, {"10.0.0.2", 8080}}))

			By("B Ready, A down to one")
			setReady("b-0", true)
			Expect(client.CoreV1().Pods(backendtest.Namespace).Delete(ctx, "a-1", metav1.DeleteOptions{})).To(Succeed())
			Eventually(ingressServed).Should(HaveKeyWithValue("/", []endpoint{{"10.0.0.1", 8080}, {"10.0.1.1", 7070}}))

			By("A's last instance gone, before A is stopped: the route stays, on B")
			Expect(client.CoreV1().Pods(backendtest.Namespace).Delete(ctx, "a-0", metav1.DeleteOptions{})).To(Succeed())
			Eventually(ingressServed).Should(HaveKeyWithValue("/", []endpoint{{"10.0.1.1", 7070}}))

			By("A stopped: its slices go, the Ingress stays")
			Expect(backend.StopLRP(ctx, a.LRPIdentifier)).To(Succeed())
			Eventually(func() int {
				list, _ := client.DiscoveryV1().EndpointSlices(backendtest.Namespace).List(ctx, metav1.ListOptions{LabelSelector: names.LabelGUID + "=" + a.GUID})
				return len(list.Items)
			}).Should(BeZero())
			Expect(ingressServed()).To(HaveKeyWithValue("/", []endpoint{{"10.0.1.1", 7070}}))

			By("B's last instance not Ready: the objects stay, with no endpoint")
			setReady("b-0", false)
			Eventually(ingressServed).Should(Equal(map[string][]endpoint{"/": {}, "/admin": {}}))

			By("B drops the hostname: every object of the route goes")
			none := []opi.Route{}
			Expect(backend.UpdateLRP(ctx, b.LRPIdentifier, opi.LRPUpdate{Routes: &none})).To(Succeed())
			Eventually(ingressPaths).Should(BeNil())
			Eventually(services).Should(BeEmpty())
		})

		It("writes a new LRP's slices once, with its first Ready instance, and none while it has none", func() {
			Expect(backend.DesireLRP(ctx, a)).To(Succeed())
			newPod(a, "a-0", "10.0.0.1", corev1.ConditionFalse)
			lead()
			Eventually(ingressServed).Should(Equal(map[string][]endpoint{"/": {}, "/admin": {}}), "the route is there, to nowhere")
			quiet()
			sliceWrites := func() []string {
				var out []string
				for _, w := range writes(backendtest.ActionsSince(client, 0)) {
					if strings.Contains(w, "endpointslices") {
						out = append(out, w)
					}
				}
				return out
			}
			Expect(sliceWrites()).To(BeEmpty())

			setReady("a-0", true)
			Eventually(ingressServed).Should(Equal(map[string][]endpoint{"/": {{"10.0.0.1", 8080}}, "/admin": {{"10.0.0.1", 9090}}}))
			quiet()
			aKey := a.GUID + "/" + a.Version
			creates := []string{
				"create endpointslices " + names.RouteSliceName(names.RouteServiceName(key, "/"), aKey, "", 0),
				"create endpointslices " + names.RouteSliceName(names.RouteServiceName(key, "/admin"), aKey, "", 0),
			}
			// Creates only (one may be sent again when a second sync finds the cache behind the
			// first's write: the API server refuses it), never an update.
			Expect(sliceWrites()).To(And(ContainElements(creates), HaveEach(BeElementOf(creates))))
		})

		It("writes only the changed LRP's slices while the route's paths stay: an instance, a port, a path another LRP still carries", func() {
			Expect(backend.DesireLRP(ctx, a)).To(Succeed())
			Expect(backend.DesireLRP(ctx, b)).To(Succeed())
			readyPod(a, "a-0", "10.0.0.1")
			readyPod(b, "b-0", "10.0.1.1")
			lead()
			Eventually(ingressServed).Should(Equal(map[string][]endpoint{
				"/": {{"10.0.0.1", 8080}, {"10.0.1.1", 7070}}, "/admin": {{"10.0.0.1", 9090}, {"10.0.1.1", 9090}},
			}))
			quiet()
			bKey := b.GUID + "/" + b.Version
			bSlice := func(path string) string {
				return names.RouteSliceName(names.RouteServiceName(key, path), bKey, "", 0)
			}
			// routeWrites are the writes of route objects since action from.
			routeWrites := func(from int) func() []string {
				return func() []string {
					var out []string
					for _, w := range writes(backendtest.ActionsSince(client, from)) {
						if strings.Contains(w, "endpointslices") || strings.Contains(w, "services") || strings.Contains(w, "ingresses") {
							out = append(out, w)
						}
					}
					return out
				}
			}

			By("B's instance not Ready: B's two slices go (an absent slice routes nowhere), nothing else")
			before := len(client.Actions())
			setReady("b-0", false)
			Eventually(ingressServed).Should(Equal(map[string][]endpoint{"/": {{"10.0.0.1", 8080}}, "/admin": {{"10.0.0.1", 9090}}}))
			bDeletes := []string{"delete endpointslices " + bSlice("/"), "delete endpointslices " + bSlice("/admin")}
			Consistently(routeWrites(before), "300ms").Should(And(ContainElements(bDeletes), HaveEach(BeElementOf(bDeletes))))

			By("B Ready again, then on another port for /: B's slices only, written again")
			before = len(client.Actions())
			setReady("b-0", true)
			Eventually(ingressServed).Should(HaveKeyWithValue("/", []endpoint{{"10.0.0.1", 8080}, {"10.0.1.1", 7070}}))
			routes := []opi.Route{{Hostname: "app.example.com", Port: 9090}, {Hostname: "app.example.com/admin", Port: 9090}}
			Expect(backend.UpdateLRP(ctx, b.LRPIdentifier, opi.LRPUpdate{Routes: &routes})).To(Succeed())
			Eventually(ingressServed).Should(HaveKeyWithValue("/", []endpoint{{"10.0.0.1", 8080}, {"10.0.1.1", 9090}}))
			bWrites := []string{
				"create endpointslices " + bSlice("/"), "create endpointslices " + bSlice("/admin"),
				"update endpointslices " + bSlice("/"), "update endpointslices " + bSlice("/admin"),
			}
			Consistently(routeWrites(before), "300ms").Should(And(ContainElements(bWrites[:3]), HaveEach(BeElementOf(bWrites))))

			By("B drops /admin, which A still carries: B's /admin slice goes, the Service and Ingress stay")
			routes = routes[:1]
			before = len(client.Actions())
			Expect(backend.UpdateLRP(ctx, b.LRPIdentifier, opi.LRPUpdate{Routes: &routes})).To(Succeed())
			Eventually(routeWrites(before)).Should(ContainElement("delete endpointslices " + bSlice("/admin")))
			Consistently(routeWrites(before), "300ms").Should(HaveEach("delete endpointslices " + bSlice("/admin")))
			Expect(ingressServed()).To(Equal(map[string][]endpoint{
				"/": {{"10.0.0.1", 8080}, {"10.0.1.1", 9090}}, "/admin": {{"10.0.0.1", 9090}},
			}))
		})

		It("keeps apps of different spaces on one hostname apart, and drops a path no LRP carries", func() {
			other := backendtest.SampleLRP()
			other.GUID, other.AppGUID, other.SpaceGUID = "11111111-2222-3333-4444-555555555555", "app-2", "space-guid-2"
			Expect(backend.DesireLRP(ctx, a)).To(Succeed())
			Expect(backend.DesireLRP(ctx, other)).To(Succeed())
			lead()
			Eventually(func() []string {
				list, _ := client.NetworkingV1().Ingresses(backendtest.Namespace).List(ctx, metav1.ListOptions{LabelSelector: names.RouteSelector})
				var out []string
				for _, i := range list.Items {
					out = append(out, i.Name)
				}
				return out
			}).Should(ConsistOf(names.RouteObjectName(key), names.RouteObjectName(names.RouteKey("space-guid-2", "app.example.com"))))

			routes := []opi.Route{{Hostname: "app.example.com", Port: 8080}}
			Expect(backend.UpdateLRP(ctx, a.LRPIdentifier, opi.LRPUpdate{Routes: &routes})).To(Succeed())
			Eventually(ingressPathsOf(client, key)).Should(Equal([]string{"/"}))
			Eventually(func() []string {
				list, err := client.CoreV1().Services(backendtest.Namespace).List(ctx, metav1.ListOptions{LabelSelector: names.RouteSelector})
				Expect(err).NotTo(HaveOccurred())
				var out []string
				for _, s := range list.Items {
					out = append(out, s.Annotations[names.AnnotationSpaceGUID]+s.Annotations[names.AnnotationRoutePath])
				}
				return out
			}).Should(ConsistOf("space-guid-1/", "space-guid-2/"), "one / Service per space, the /admin Service gone")
		})

		It("puts back an object deleted or edited behind its back", func() {
			Expect(backend.DesireLRP(ctx, a)).To(Succeed())
			readyPod(a, "a-0", "10.0.0.1")
			lead()
			Eventually(ingressServed).Should(HaveKeyWithValue("/", []endpoint{{"10.0.0.1", 8080}}))

			Expect(client.NetworkingV1().Ingresses(backendtest.Namespace).Delete(ctx, names.RouteObjectName(key), metav1.DeleteOptions{})).To(Succeed())
			Eventually(ingressPaths).ShouldNot(BeNil())
			slice := sliceOf(client, names.RouteServiceName(key, "/"))
			slice.Endpoints = nil
			_, err := client.DiscoveryV1().EndpointSlices(backendtest.Namespace).Update(ctx, slice, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
			Eventually(ingressServed).Should(HaveKeyWithValue("/", []endpoint{{"10.0.0.1", 8080}}))
		})

		It("writes an LRP's slice once an object of its name that is not opi's is gone, with no event of it", func() {
			Expect(backend.DesireLRP(ctx, a)).To(Succeed())
			readyPod(a, "a-0", "10.0.0.1")
			readyPod(b, "b-0", "10.0.1.1")
			lead()
			Eventually(ingressServed).Should(HaveKeyWithValue("/", []endpoint{{"10.0.0.1", 8080}}))
			quiet()

			By("B's slice of / taken by someone else's object, without route labels (never in opi's caches)")
			name := names.RouteSliceName(names.RouteServiceName(key, "/"), b.GUID+"/"+b.Version, "", 0)
			foreign := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: backendtest.Namespace}, AddressType: discoveryv1.AddressTypeIPv4}
			_, err := client.DiscoveryV1().EndpointSlices(backendtest.Namespace).Create(ctx, foreign, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			before := len(client.Actions())
			Expect(backend.DesireLRP(ctx, b)).To(Succeed())
			Eventually(func() []string { return backendtest.ActionsSince(client, before) }).Should(ContainElement("create endpointslices " + name))
			Consistently(ingressServed, "300ms").Should(HaveKeyWithValue("/", []endpoint{{"10.0.0.1", 8080}}))

			By("that object deleted: B is served on the next retry")
			Expect(client.DiscoveryV1().EndpointSlices(backendtest.Namespace).Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
			Eventually(ingressServed, "10s").Should(HaveKeyWithValue("/", []endpoint{{"10.0.0.1", 8080}, {"10.0.1.1", 7070}}))
		})

		It("has a new term take the objects over as they are: no write where nothing changed, no gap", func() {
			Expect(backend.DesireLRP(ctx, a)).To(Succeed())
			Expect(backend.DesireLRP(ctx, b)).To(Succeed())
			readyPod(a, "a-0", "10.0.0.1")
			readyPod(b, "b-0", "10.0.1.1")
			stop := lead()
			Eventually(ingressServed).Should(HaveKeyWithValue("/", []endpoint{{"10.0.0.1", 8080}, {"10.0.1.1", 7070}}))
			quiet()
			stop()

			before := len(client.Actions())
			lead()
			Consistently(func() []string { return writes(backendtest.ActionsSince(client, before)) }, "500ms").Should(BeEmpty())

			By("what changed while no term ran is put right by the next")
			Expect(client.CoreV1().Pods(backendtest.Namespace).Delete(ctx, "a-0", metav1.DeleteOptions{})).To(Succeed())
			Eventually(ingressServed).Should(HaveKeyWithValue("/", []endpoint{{"10.0.1.1", 7070}}))
		})

		It("writes no route object on a desire, and none for an LRP without routes", func() {
			a.Routes = nil
			before := len(client.Actions())
			Expect(backend.DesireLRP(ctx, a)).To(Succeed())
			Expect(backendtest.ActionsSince(client, before)).NotTo(ContainElement(MatchRegexp("ingresses|endpointslices")))
			lead()
			Consistently(ingressPaths, "300ms").Should(BeNil())
		})
	})

	Describe("in gateway mode", func() {
		var (
			backend *k8s.Backend
			gw      *gatewayfake.Clientset
		)
		BeforeEach(func() {
			gw = gatewayfake.NewClientset()
			backend = backendtest.StartBackendWith(client, k8s.Options{
				Hooks: hooks.Options{Routing: hooks.RoutingOptions{Mode: hooks.RoutingGateway, GatewayNamespace: "gateways", GatewayName: "cf"},
					HeadlessServices: true},
				Clients: k8s.Clients{Gateway: gw},
			})
		})
		httpRoutes := func() []gatewayv1.HTTPRoute {
			list, err := gw.GatewayV1().HTTPRoutes(backendtest.Namespace).List(ctx, metav1.ListOptions{LabelSelector: names.RouteSelector})
			Expect(err).NotTo(HaveOccurred())
			return list.Items
		}

		It("makes one HTTPRoute per hostname of a space on the Gateway, a rule per path to its Service, and no Ingress", func() {
			Expect(backend.DesireLRP(ctx, a)).To(Succeed())
			Expect(backend.DesireLRP(ctx, b)).To(Succeed())
			readyPod(a, "a-0", "10.0.0.1")
			readyPod(b, "b-0", "10.0.1.1")
			backendtest.Lead(backend.RunLeaderWork)
			Eventually(httpRoutes).Should(HaveLen(1))
			r := httpRoutes()[0]
			Expect(r.Name).To(Equal(names.RouteObjectName(key)))
			Expect(r.Spec.ParentRefs).To(Equal([]gatewayv1.ParentReference{{
				Group: ptr.To(gatewayv1.Group("gateway.networking.k8s.io")), Kind: ptr.To(gatewayv1.Kind("Gateway")),
				Namespace: ptr.To(gatewayv1.Namespace("gateways")), Name: "cf",
			}}))
			Expect(r.Spec.Hostnames).To(Equal([]gatewayv1.Hostname{"app.example.com"}))
			Expect(r.Spec.Rules).To(Equal([]gatewayv1.HTTPRouteRule{
				httpRule("/", names.RouteServiceName(key, "/")),
				httpRule("/admin", names.RouteServiceName(key, "/admin")),
			}))
			Eventually(func() map[string][]endpoint {
				return served(map[string]string{"/": names.RouteServiceName(key, "/")})
			}).Should(Equal(map[string][]endpoint{"/": {{"10.0.0.1", 8080}, {"10.0.1.1", 7070}}}))
			Expect(ingressPaths()).To(BeNil())
			Expect(services()["/"].Spec.ClusterIP).To(Equal(corev1.ClusterIPNone), "headless, as the LRPs' own Services")

			Expect(backend.StopLRP(ctx, a.LRPIdentifier)).To(Succeed())
			Expect(backend.StopLRP(ctx, b.LRPIdentifier)).To(Succeed())
			Eventually(httpRoutes).Should(BeEmpty())
			Eventually(services).Should(BeEmpty())
		})
	})
})

func ingressPath(path, service string) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{
		Path: path, PathType: ptr.To(networkingv1.PathTypePrefix),
		Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
			Name: service, Port: networkingv1.ServiceBackendPort{Number: 8080},
		}},
	}
}

func httpRule(path, service string) gatewayv1.HTTPRouteRule {
	return gatewayv1.HTTPRouteRule{
		Matches: []gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To(path)}}},
		BackendRefs: []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{
			BackendObjectReference: gatewayv1.BackendObjectReference{
				Group: ptr.To(gatewayv1.Group("")), Kind: ptr.To(gatewayv1.Kind("Service")),
				Name: gatewayv1.ObjectName(service), Port: ptr.To(gatewayv1.PortNumber(8080)),
			},
			Weight: ptr.To(int32(1)),
		}}},
	}
}

// ingressPathsOf polls the paths of key's Ingress.
func ingressPathsOf(client *fake.Clientset, key string) func() []string {
	return func() []string {
		ing, err := client.NetworkingV1().Ingresses(backendtest.Namespace).Get(context.Background(), names.RouteObjectName(key), metav1.GetOptions{})
		if err != nil {
			return nil
		}
		var out []string
		for _, p := range ing.Spec.Rules[0].HTTP.Paths {
			out = append(out, p.Path)
		}
		return out
	}
}

// sliceOf is the one EndpointSlice of service.
func sliceOf(client *fake.Clientset, service string) *discoveryv1.EndpointSlice {
	list, err := client.DiscoveryV1().EndpointSlices(backendtest.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	ExpectWithOffset(1, list.Items).To(HaveLen(1))
	return &list.Items[0]
}

// writes are the creates, updates and deletes among actions.
func writes(actions []string) []string {
	var out []string
	for _, a := range actions {
		for _, verb := range []string{"create ", "update ", "delete ", "patch "} {
			if len(a) > len(verb) && a[:len(verb)] == verb {
				out = append(out, a)
			}
		}
	}
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
