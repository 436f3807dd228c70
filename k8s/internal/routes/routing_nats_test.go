package routes_test

import (
	"context"
	"net"
	"sync"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/gorouter"
	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/janitor"
	"github.com/opi-bridge/opi/k8s/internal/routes"
	"github.com/opi-bridge/opi/k8s/internal/routes/routesfakes"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// Routing mode nats: no Service and no routing object; the leader work "routes" fills the
// gorouter table it is handed.
var _ = Describe("Routing nats", func() {
	var (
		ctx    context.Context
		client *fake.Clientset
		table  *routesfakes.FakeTable
		lrp    *opi.LRP
		name   string
	)
	natsOptions := func() k8s.Options {
		return k8s.Options{
			Hooks:   hooks.Options{Routing: hooks.RoutingOptions{Mode: hooks.RoutingNATS}},
			Clients: k8s.Clients{Routes: table},
		}
	}

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		table = new(routesfakes.FakeTable)
		lrp = backendtest.SampleLRP()
		name = names.DeploymentName(lrp)
	})

	It("makes no Service and no routing object, and the Secrets, egress policy and disruption budget as the other modes", func() {
		opts := natsOptions()
		opts.Hooks.NetworkPolicy.Enabled = true
		backend := backendtest.StartBackendWith(client, opts)
		lrp.PrivateRegistry = &opi.PrivateRegistry{Username: "user", Password: "registry-pw"}
		lrp.EgressRules = []opi.EgressRule{{Protocol: "all", Destinations: []string{"10.0.0.0/8"}}}
		before := len(client.Actions())
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, before), "create deployments "+name, []backendtest.Step{
			{"create secrets " + name + "-env"},
			{"create secrets " + name + "-registry"},
		}, []backendtest.Step{
			{"create networkpolicies " + name},
			{"create poddisruptionbudgets " + name},
		})
		Expect(backendtest.GetDeployment(client, name).Annotations).To(HaveKey(names.AnnotationRoutes))

		before = len(client.Actions())
		routes := []opi.Route{{Hostname: "new.example.com/docs", Port: 9090}}
		Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Routes: &routes})).To(Succeed())
		Expect(backendtest.ActionsSince(client, before)).To(Equal([]string{"patch deployments " + name}))
	})

	DescribeTable("checks the routes as the other modes, writing nothing",
		func(route opi.Route, message string) {
			backend := backendtest.StartBackendWith(client, natsOptions())
			backendtest.ExpectRouteRefused(client, backend, lrp, route, message)
		},
		backendtest.UnservableRoutes,
	)

	DescribeTable("NewBackend refuses a table and a mode that do not go together",
		func(opts k8s.Options, message string) {
			opts.Namespace = backendtest.Namespace
			b, err := k8s.NewBackend(client, lagertest.NewTestLogger("k8s"), opts)
			Expect(err).To(MatchError(message))
			Expect(b).To(BeNil())
		},
		Entry("nats without a table", k8s.Options{Hooks: hooks.Options{Routing: hooks.RoutingOptions{Mode: hooks.RoutingNATS}}},
			"routing nats needs the gorouter table (Clients.Routes)"),
		Entry("a table with ingress", k8s.Options{Hooks: hooks.Options{Routing: hooks.RoutingOptions{Mode: hooks.RoutingIngress}}, Clients: k8s.Clients{Routes: new(routesfakes.FakeTable)}},
			`a gorouter table (Clients.Routes) is for routing nats only, not "ingress"`),
		Entry("a table without a mode", k8s.Options{Clients: k8s.Clients{Routes: new(routesfakes.FakeTable)}},
			`a gorouter table (Clients.Routes) is for routing nats only, not ""`),
	)

	It("runs leader work routes that registers each Ready pod with an IP, with its node's zone", func() {
		opts := natsOptions()
		opts.Clients.Zone = func(node string) string { return map[string]string{"node-1": "z1"}[node] }
		backend := backendtest.StartBackendWith(client, opts)
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
		pod := backendtest.NewPod(lrp, "pod-a", t0, corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.1.2.3",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}},
		})
		pod.UID = "pod-uid-a"
		pod.Spec.NodeName = "node-1"
		backendtest.CreatePod(client, pod)
		backendtest.CreatePod(client, backendtest.NewPod(lrp, "pod-b", t0, corev1.PodStatus{Phase: corev1.PodPending}))

		leaderCtx, stop := context.WithCancel(ctx)
		var done sync.WaitGroup
		done.Go(func() { backend.RunLeaderWork(leaderCtx) })
		DeferCleanup(func() { stop(); done.Wait() })

		Eventually(table.SetCallCount).Should(BeNumerically(">=", 1))
		Expect(table.ReplaceCallCount()).To(Equal(1))
		Eventually(table.RunCallCount).Should(Equal(1))
		key, reg, readySince := table.SetArgsForCall(table.SetCallCount() - 1)
		Expect(key).To(Equal("pod-uid-a/8080"))
		Expect(readySince).To(Equal(t0))
		Expect(reg.Host).To(Equal("10.1.2.3"))
		Expect(reg.Port).To(Equal(uint16(8080)))
		Expect(reg.AvailabilityZone).To(Equal("z1"))
		Expect(reg.URIs).To(Equal([]string{"app.example.com"}))
		Expect(reg.App).To(Equal(lrp.AppGUID))
		Expect(reg.PrivateInstanceID).To(Equal("pod-uid-a"))
		records, err := client.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: routes.LabelRecord + "=true"})
		Expect(err).NotTo(HaveOccurred())
		Expect(records.Items).To(HaveLen(1), "the endpoint recorded before it was registered")
		Expect(records.Items[0].Data["endpoints"]).To(ContainSubstring(`"host":"10.1.2.3"`))
	})

	It("has the janitor delete an earlier mode's Services and Ingresses of opi's LRPs", func() {
		opts := natsOptions()
		opts.Janitor = janitor.Options{Grace: time.Minute}
		nats := backendtest.StartBackendWith(client, opts)
		Expect(nats.DesireLRP(ctx, lrp)).To(Succeed())
		// What ingress mode made of the LRP: its Service and Ingress, controlled by the Deployment.
		d := backendtest.GetDeployment(client, name)
		owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}
		meta := metav1.ObjectMeta{Name: name, Namespace: backendtest.Namespace, Labels: names.LRPLabels(lrp), OwnerReferences: []metav1.OwnerReference{owner}}
		_, err := client.CoreV1().Services(backendtest.Namespace).Create(ctx, &corev1.Service{ObjectMeta: meta}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = client.NetworkingV1().Ingresses(backendtest.Namespace).Create(ctx, &networkingv1.Ingress{ObjectMeta: meta}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		before := len(client.Actions())
		nats.Sweep(ctx)
		Expect(backendtest.ActionsSince(client, before)).To(ContainElements("delete services "+name, "delete ingresses "+name))
		services, err := client.CoreV1().Services(backendtest.Namespace).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(services.Items).To(BeEmpty())
		ingresses, err := client.NetworkingV1().Ingresses(backendtest.Namespace).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(ingresses.Items).To(BeEmpty())
	})

	It("stays ready while NATS cannot be reached: the emitter logs and counts it, and keeps trying", func() {
		// A port nothing listens on.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		addr := l.Addr().String()
		Expect(l.Close()).To(Succeed())
		logger := lagertest.NewTestLogger("gorouter")
		counts := &natsErrors{}
		emitter, err := gorouter.NewEmitter(gorouter.Config{URLs: []string{"nats://" + addr}}, logger, counts)
		Expect(err).NotTo(HaveOccurred())
		opts := natsOptions()
		opts.Clients.Routes = emitter
		backend := backendtest.StartBackendWith(client, opts)

		leaderCtx, stop := context.WithCancel(ctx)
		var done sync.WaitGroup
		done.Go(func() { backend.RunLeaderWork(leaderCtx) })
		DeferCleanup(func() { stop(); done.Wait() })

		Eventually(counts.connectFailures).Should(BeNumerically(">=", 2))
		Expect(logger.LogMessages()).To(ContainElement("gorouter.gorouter-emitter.nats-connect-attempt-failed"))
		Expect(backend.Ready(ctx)).To(Succeed())
	})
})

// natsErrors is gorouter.Metrics counting the failed attempts to connect.
type natsErrors struct {
	mu      sync.Mutex
	connect int
}

func (n *natsErrors) connectFailures() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.connect
}
func (n *natsErrors) CountNATSError(kind string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if kind == "connect" {
		n.connect++
	}
}
func (*natsErrors) SetRouteRegistrations(int)                   {}
func (*natsErrors) CountNATSMessage(string)                     {}
func (*natsErrors) SetNATSConnected(bool)                       {}
func (*natsErrors) ObserveRouteRegistrationDelay(time.Duration) {}
