package integration_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/opi-bridge/opi/gorouter"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/testsupport/fixture"
	"github.com/opi-bridge/opi/testsupport/kubeletstats"
	standin "github.com/opi-bridge/opi/testsupport/loggregator"
	"github.com/opi-bridge/opi/testsupport/natsserver"
)

// carrier is one LRP carrying the route at a step of a spec: its desired instances and the
// port its route names.
type carrier struct {
	lrp       *app
	instances int
	port      int
}

// served is one instance a route sends to, as "<process guid> <ip>:<port> <pod uid>": who
// carries it, where it listens, which pod it is (by uid: a StatefulSet's replacement pod keeps
// the name).
func served(guid, ip string, port int32, podUID string) string {
	return fmt.Sprintf("%s %s:%d %s", guid, ip, port, podUID)
}

// routeView reads what a route (host and path) is sent to in one routing mode.
type routeView interface {
	// routes says whether the mode routes at all: in mode none a route sends nowhere.
	routes() bool
	// read is what the route's objects or registrations name, sorted, and the identity of its
	// objects ("" where there are none): it changes only if they are replaced.
	read(g Gomega, host, path string) (targets []string, identity string)
	// gone checks that nothing of the route is left.
	gone(g Gomega, host, path string)
}

// rollingMode is one routing mode the rolling specs run in.
type rollingMode struct {
	name string
	// gauges runs the node's agent in the rolling spec, to check the gauges' sources after each
	// step: one mode per backend is enough, as the routing mode changes nothing of them.
	gauges bool
	// start runs opi in ns in the mode and returns it with its view of routes.
	start func(ns string) (*opiServer, routeView)
}

// rollingModes are the modes of the suite's backend: every mode on Deployments; on
// StatefulSets the default one, ingress, so that the suite's second run costs one pair of specs.
func rollingModes() []rollingMode {
	nats := rollingMode{name: "nats", gauges: true, start: func(ns string) (*opiServer, routeView) {
		srv := startNATS(natsserver.Options{})
		l := watchRouter(srv.URL())
		return startOpi(ns, "--routing", "nats", "--nats-url", srv.URL()), natsView{ns: ns, log: l}
	}}
	none := rollingMode{name: "none", start: func(ns string) (*opiServer, routeView) {
		return startOpi(ns, "--routing", "none"), noneView{ns: ns}
	}}
	ingress := rollingMode{name: "ingress", start: func(ns string) (*opiServer, routeView) {
		return startOpi(ns, "--routing", "ingress", "--ingress-class", "nginx"), ingressView{ns: ns}
	}}
	gateway := rollingMode{name: "gateway", start: func(ns string) (*opiServer, routeView) {
		return startOpi(ns, "--routing", "gateway", "--gateway-namespace", "gateways", "--gateway-name", "cf"), gatewayView{ns: ns}
	}}
	if statefulSets() {
		ingress.gauges = true
		return []rollingMode{ingress}
	}
	return []rollingMode{nats, ingress, gateway, none}
}

// natsView reads a route from the router.* messages one subscriber saw: what gorouter would
// hold for the URI, every endpoint registered and not unregistered since.
type natsView struct {
	ns  string
	log *routerLog
}

func (v natsView) registered(uri string) []string {
	held := map[string]bool{}
	for _, m := range v.log.orderedSince(0) {
		if slices.Contains(m.reg.URIs, uri) {
			t := served(m.reg.Tags["process_id"], m.reg.Host, int32(m.reg.Port), m.reg.PrivateInstanceID)
			held[t] = m.subject == gorouter.SubjectRegister
		}
	}
	out := []string{}
	for t, on := range held {
		if on {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

func (natsView) routes() bool { return true }

func (v natsView) read(_ Gomega, host, path string) ([]string, string) {
	return v.registered(host + path), ""
}

func (v natsView) gone(g Gomega, host, path string) {
	g.Expect(v.registered(host+path)).To(BeEmpty(), "every endpoint of %s unregistered", host+path)
}

// noneView is routing mode none: no route object of any kind, ever.
type noneView struct{ ns string }

func (noneView) routes() bool { return false }

func (v noneView) read(g Gomega, host, path string) ([]string, string) {
	v.gone(g, host, path)
	return []string{}, ""
}

func (v noneView) gone(g Gomega, _, _ string) {
	g.Expect(routingObjects(g, v.ns)).To(BeEmpty())
}

// routingObjects are the kind/name of every object of ns that routes: Ingresses, HTTPRoutes, and
// Services or EndpointSlices labelled as a route's.
func routingObjects(g Gomega, ns string) []string {
	ctx := context.Background()
	out := []string{}
	ingresses, err := kube.NetworkingV1().Ingresses(ns).List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range ingresses.Items {
		out = append(out, "ingress/"+o.Name)
	}
	routes, err := gatewayClient().GatewayV1().HTTPRoutes(ns).List(ctx, metav1.ListOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range routes.Items {
		out = append(out, "httproute/"+o.Name)
	}
	byRoute := metav1.ListOptions{LabelSelector: names.RouteSelector}
	services, err := kube.CoreV1().Services(ns).List(ctx, byRoute)
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range services.Items {
		out = append(out, "service/"+o.Name)
	}
	endpointSlices, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, byRoute)
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range endpointSlices.Items {
		out = append(out, "endpointslice/"+o.Name)
	}
	return out
}

func gatewayClient() gateway.Interface {
	return gateway.NewForConfigOrDie(cluster.RestConfig())
}

// readyTargets is what a route must send to with carriers carrying it: each Ready instance (Ready,
// with an IP, not being deleted) of each, on the carrier's port, sorted. The error says why the
// carriers are not settled yet: a live instance not Ready, or live instances other than desired.
func readyTargets(ns string, carriers ...carrier) ([]string, error) {
	out := []string{}
	var errs []error
	for _, c := range carriers {
		live := 0
		for _, p := range pods(ns, c.lrp) {
			if p.DeletionTimestamp != nil {
				continue
			}
			live++
			if !natsRegistrable(p) {
				errs = append(errs, fmt.Errorf("pod %s not Ready with an IP", p.Name))
				continue
			}
			out = append(out, served(c.lrp.guid, p.Status.PodIP, int32(c.port), string(p.UID)))
		}
		if live != c.instances {
			errs = append(errs, fmt.Errorf("%d live instances of %s, want %d", live, c.lrp.guid, c.instances))
		}
	}
	slices.Sort(out)
	return out, errors.Join(errs...)
}

// routeCheck follows one route through the steps of a spec: after each, what the route sends to
// and what CC reads.
type routeCheck struct {
	o          *opiServer
	view       routeView
	host, path string
	// identity is the route objects' identity at the first step: they stay while any LRP
	// carries the route.
	identity string
}

// expect waits until the pods settle at carriers and checks that the route sends to exactly
// their Ready instances, that its objects were not replaced, and that CC's reads (GET /apps,
// GET .../instances) answer for each carrier and 404 for each LRP in stopped.
func (r *routeCheck) expect(carriers []carrier, stopped ...*app) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		want, err := readyTargets(r.o.Namespace, carriers...)
		g.Expect(err).NotTo(HaveOccurred())
		if !r.view.routes() {
			want = []string{}
		}
		got, identity := r.view.read(g, r.host, r.path)
		g.Expect(got).To(Equal(want))
		if r.identity == "" {
			r.identity = identity
		}
		g.Expect(identity).To(Equal(r.identity), "the route's objects kept, not replaced")
	}).Should(Succeed())

	Eventually(func(g Gomega) {
		g.Expect(schedulingInfos(g, r.o)).To(Equal(wantSchedulingInfos(carriers)))
		for _, c := range carriers {
			g.Expect(instanceIndexes(g, r.o, c.lrp)).To(Equal(runningIndexes(c.instances)), "instances of %s", c.lrp.guid)
		}
	}).Should(Succeed())
	for _, a := range stopped {
		status, body := r.o.call("GET", a.path()+"/instances", "")
		Expect(status).To(Equal(http.StatusNotFound), body)
	}
}

// expectGone checks that nothing of the route is left once no LRP carries it.
func (r *routeCheck) expectGone() {
	GinkgoHelper()
	Eventually(func(g Gomega) { r.view.gone(g, r.host, r.path) }).Should(Succeed())
	Eventually(func(g Gomega) { g.Expect(schedulingInfos(g, r.o)).To(BeEmpty()) }).Should(Succeed())
}

// schedulingInfos is GET /apps as "<process guid> <app's log guid> <instances>", sorted.
func schedulingInfos(g Gomega, o *opiServer) []string {
	status, body := o.call("GET", "/apps", "")
	g.Expect(status).To(Equal(http.StatusOK), body)
	var list models.DesiredLRPSchedulingInfosResponse
	g.Expect(json.Unmarshal([]byte(body), &list)).To(Succeed())
	out := []string{}
	for _, info := range list.DesiredLRPSchedulingInfos {
		g.Expect(info.DesiredLRPKey.ProcessGUID).To(Equal(info.GUID + "-" + info.Version))
		out = append(out, fmt.Sprintf("%s %s %d", info.DesiredLRPKey.ProcessGUID, info.DesiredLRPKey.LogGUID, info.Instances))
	}
	slices.Sort(out)
	return out
}

func wantSchedulingInfos(carriers []carrier) []string {
	out := []string{}
	for _, c := range carriers {
		out = append(out, fmt.Sprintf("%s %s %d", c.lrp.processGUID(), c.lrp.appGUID(), c.instances))
	}
	slices.Sort(out)
	return out
}

// instanceIndexes is GET .../instances as "<index> <state>".
func instanceIndexes(g Gomega, o *opiServer, a *app) []string {
	status, body := o.call("GET", a.path()+"/instances", "")
	g.Expect(status).To(Equal(http.StatusOK), body)
	var resp models.InstancesResponse
	g.Expect(json.Unmarshal([]byte(body), &resp)).To(Succeed())
	g.Expect(resp.ProcessGUID).To(Equal(a.processGUID()))
	out := []string{}
	for _, in := range resp.Instances {
		out = append(out, strconv.Itoa(int(in.Index))+" "+in.State)
	}
	return out
}

func runningIndexes(n int) []string {
	out := []string{}
	for i := range n {
		out = append(out, strconv.Itoa(i)+" RUNNING")
	}
	return out
}

// gaugeWatch is the node's agent run against a Loggregator and a kubelet stand-in, to see under
// which source each instance's container gauges go.
type gaugeWatch struct {
	ns      string
	ingress *standin.Server
	kubelet *kubeletstats.Server
	// owner is the process guid of each pod the kubelet stand-in reported so far, by uid: a
	// round the agent read before the last summary was set names earlier pods.
	owner map[string]string
}

// startGaugeWatch starts the agent of the suite's node for the apps of ns, sending every second
// so that each step of a spec sees rounds of its own.
func startGaugeWatch(ns string) *gaugeWatch {
	ingress, err := standin.Start(GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(ingress.Stop)
	kubelet, err := kubeletstats.Start(GinkgoT().TempDir(), "agent-token")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(kubelet.Close)
	args := append(agentArgs(suiteNode(), ns, GinkgoT().TempDir(), GinkgoT().TempDir(), ingress, kubelet), "--metrics-interval", "1s")
	agent := &agentProcess{args: args}
	DeferCleanup(agent.stop)
	agent.start()
	return &gaugeWatch{ns: ns, ingress: ingress, kubelet: kubelet, owner: map[string]string{}}
}

// expect has the kubelet report every live instance of lrps and checks the agent's gauges from
// then on: every gauge goes under the guid of its pod's process (none under another's, in any
// round), and a whole round read as CC's OPI mode reads a process (its guid's source, by
// instance_id) is exactly each process's own instances, one pod each.
func (w *gaugeWatch) expect(lrps ...*app) {
	GinkgoHelper()
	want := map[string]map[string][]string{}
	var stats []statsv1alpha1.PodStats
	for _, a := range lrps {
		byName := map[string]corev1.Pod{}
		for _, p := range pods(w.ns, a) {
			byName[p.Name] = p
		}
		for i, name := range livePodNames(w.ns, a) {
			pod := byName[name]
			if want[a.guid] == nil {
				want[a.guid] = map[string][]string{}
			}
			want[a.guid][strconv.Itoa(i)] = []string{string(pod.UID)}
			w.owner[string(pod.UID)] = a.guid
			stats = append(stats, statsv1alpha1.PodStats{
				PodRef: statsv1alpha1.PodReference{Name: pod.Name, Namespace: w.ns, UID: string(pod.UID)},
				Containers: []statsv1alpha1.ContainerStats{{
					Name:   names.ContainerName,
					CPU:    &statsv1alpha1.CPUStats{UsageNanoCores: ptr.To[uint64](50_000_000)},
					Memory: &statsv1alpha1.MemoryStats{WorkingSetBytes: ptr.To[uint64](32 << 20)},
				}},
			})
		}
	}
	w.kubelet.SetSummary(statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: suiteNode()}, Pods: stats})
	mark := len(w.ingress.Envelopes())
	Eventually(func(g Gomega) {
		rounds := gaugeRounds(w.ingress.Envelopes()[mark:])
		for _, round := range rounds {
			for _, e := range round {
				uid := e.Tags["process_instance_id"]
				g.Expect(w.owner).To(HaveKey(uid), "a gauge of a pod the kubelet reported")
				g.Expect(e.SourceId).To(Equal(w.owner[uid]), "the gauges of pod %s under its own process's guid", uid)
			}
		}
		// The last round may still be arriving; the one before it is whole.
		g.Expect(len(rounds)).To(BeNumerically(">=", 2), "a whole round of gauges")
		out := map[string]map[string][]string{}
		for source, rows := range standin.GaugesBySource(rounds[len(rounds)-2]) {
			out[source] = map[string][]string{}
			for id, envs := range rows {
				for _, e := range envs {
					out[source][id] = append(out[source][id], e.Tags["process_instance_id"])
				}
			}
		}
		g.Expect(out).To(Equal(want))
	}, 60*time.Second).Should(Succeed())
}

// gaugeRounds are the gauge envelopes among envs by round of the agent, in order: a round's
// gauges carry the one time it read the kubelet's summary at.
func gaugeRounds(envs []*loggregator_v2.Envelope) [][]*loggregator_v2.Envelope {
	var out [][]*loggregator_v2.Envelope
	at := map[int64]int{}
	for _, e := range envs {
		if e.GetGauge() == nil {
			continue
		}
		i, ok := at[e.Timestamp]
		if !ok {
			i = len(out)
			at[e.Timestamp] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], e)
	}
	return out
}

// appGUID is the app guid CC sends for a: its own unless the test gave another.
func (a *app) appGUID() string {
	if g, ok := a.extra["app_guid"].(string); ok {
		return g
	}
	return "app-" + a.guid
}

// newProcessOf is the web process CC desires for a rolling deploy of a's app: a new guid (and
// version) of the same app, with a's routes.
func newProcessOf(a *app) *app {
	b := newApp()
	b.instances = 1
	b.extra = map[string]any{"app_guid": a.appGUID()}
	for k, v := range a.extra {
		if k != "app_guid" {
			b.extra[k] = v
		}
	}
	return b
}

// onRoute gives a the route hostname (host and path) on port, the app's only port.
func onRoute(a *app, hostname string, port int) {
	a.extra = map[string]any{"ports": []int{port}, "routes": fixture.Routes(hostname, port)}
}

var _ = Describe("Rolling deploys and blue-green: a route sends to every Ready instance of every LRP carrying it", func() {
	for _, mode := range rollingModes() {
		Context("routing "+mode.name, func() {
			It("follows CC's rolling deploy: desire B with A's routes, B up and A down step by step, stop A", func() {
				ns := newNamespace()
				o, view := mode.start(ns)
				var gauges *gaugeWatch
				if mode.gauges {
					gauges = startGaugeWatch(ns)
				}
				// A is the app's original web process, whose guid is the app guid.
				a := newApp()
				onRoute(a, "dora.example.com", 8080)
				a.extra["app_guid"] = a.guid
				r := &routeCheck{o: o, view: view, host: "dora.example.com"}
				// step checks the route and CC's reads at carriers and, where the agent runs, that
				// each carrier's gauges go under its own guid with exactly its instances.
				step := func(carriers []carrier, stopped ...*app) {
					GinkgoHelper()
					r.expect(carriers, stopped...)
					if gauges != nil {
						var lrps []*app
						for _, c := range carriers {
							lrps = append(lrps, c.lrp)
						}
						gauges.expect(lrps...)
					}
				}

				By("A, two instances")
				desire(o, a)
				step([]carrier{{a, 2, 8080}})

				By("B, A's new web process: one instance on the same route")
				b := newProcessOf(a)
				desire(o, b)
				step([]carrier{{a, 2, 8080}, {b, 1, 8080}})

				By("B at 1, A down to 1")
				scaleInstances(o, b, 1, "1700000001.0")
				scaleInstances(o, a, 1, "1700000001.0")
				step([]carrier{{a, 1, 8080}, {b, 1, 8080}})

				By("B up to 2, A down to 0")
				scaleInstances(o, b, 2, "1700000002.0")
				scaleInstances(o, a, 0, "1700000002.0")
				step([]carrier{{a, 0, 8080}, {b, 2, 8080}})

				By("A stopped: B alone")
				stop(o, a)
				step([]carrier{{b, 2, 8080}}, a)

				By("B stopped: nothing carries the route")
				stop(o, b)
				r.expectGone()
			})

			It("follows classic blue-green: two apps of one space on one route, each on its own port, the first stopped", func() {
				ns := newNamespace()
				o, view := mode.start(ns)
				blue, green := newApp(), newApp()
				onRoute(blue, "shop.example.com/cart", 8080)
				onRoute(green, "shop.example.com/cart", 9090)
				r := &routeCheck{o: o, view: view, host: "shop.example.com", path: "/cart"}

				By("blue, two instances")
				desire(o, blue)
				r.expect([]carrier{{blue, 2, 8080}})

				By("green, another app of the space mapped to the route")
				desire(o, green)
				r.expect([]carrier{{blue, 2, 8080}, {green, 2, 9090}})

				By("blue stopped: green alone")
				stop(o, blue)
				r.expect([]carrier{{green, 2, 9090}}, blue)

				By("green stopped: nothing carries the route")
				stop(o, green)
				r.expectGone()
			})
		})
	}
})
