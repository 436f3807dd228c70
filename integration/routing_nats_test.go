package integration_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/gorouter"
	"github.com/opi-bridge/opi/testsupport/fixture"
	"github.com/opi-bridge/opi/testsupport/natsserver"
)

// routerMessages subscribes to router.* on srv and returns the register and unregister
// messages' subjects and bodies as they arrive.
func routerMessages(srv *natsserver.Server) <-chan *nats.Msg {
	nc, err := nats.Connect(srv.URL())
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(nc.Close)
	all := make(chan *nats.Msg, 256)
	_, err = nc.ChanSubscribe("router.*", all)
	Expect(err).NotTo(HaveOccurred())
	Expect(nc.Flush()).To(Succeed())
	return all
}

// nextRouterMessage is the next message of subject on msgs (others, router.greet among them, skipped).
func nextRouterMessage(msgs <-chan *nats.Msg, subject string) gorouter.Registration {
	GinkgoHelper()
	var reg gorouter.Registration
	Eventually(func() bool {
		for {
			select {
			case m := <-msgs:
				if m.Subject == subject {
					Expect(json.Unmarshal(m.Data, &reg)).To(Succeed())
					return true
				}
			default:
				return false
			}
		}
	}, 60*time.Second, 100*time.Millisecond).Should(BeTrue(), "no %s message", subject)
	return reg
}

var _ = Describe("Routing nats: gorouter over a real NATS server", func() {
	It("registers a Ready instance's pod IP and port with its routes and CF tags, and unregisters it on stop", func() {
		srv, err := natsserver.Start(natsserver.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(srv.Shutdown)
		msgs := routerMessages(srv)

		ns := newNamespace()
		o := startOpi(ns, "--routing", "nats", "--nats-url", srv.URL())
		a := newApp()
		a.instances = 1
		desire(o, a)

		reg := nextRouterMessage(msgs, gorouter.SubjectRegister)
		var pod corev1.Pod
		for _, p := range pods(ns, a) {
			if p.DeletionTimestamp == nil {
				pod = p
			}
		}
		Expect(pod.Status.PodIP).NotTo(BeEmpty())
		Expect(reg).To(Equal(gorouter.Registration{
			Host:                 pod.Status.PodIP,
			Port:                 8080,
			URIs:                 []string{"dora.example.com"},
			App:                  "app-" + a.guid,
			PrivateInstanceID:    string(pod.UID),
			PrivateInstanceIndex: "0",
			Tags: map[string]string{
				"app_id": "app-" + a.guid, "app_name": "Dora The App",
				"space_id": "space-1", "space_name": "dev",
				"organization_id": "org-1", "organization_name": "acme",
				"process_id": a.guid, "process_type": "web",
				"process_instance_id": string(pod.UID), "instance_id": "0",
				"source_id": "app-" + a.guid, "component": "opi",
			},
		}))
		Expect(kubectl("get", "services", "-n", ns, "-l", selector(a), "-o", "name")).To(BeEmpty(), "no Service in nats mode")

		stop(o, a)
		unreg := nextRouterMessage(msgs, gorouter.SubjectUnregister)
		Expect(unreg.Host).To(Equal(pod.Status.PodIP))
		Expect(unreg.Port).To(Equal(uint16(8080)))
		Expect(unreg.URIs).To(Equal([]string{"dora.example.com"}))
		Expect(unreg.PrivateInstanceID).To(Equal(string(pod.UID)))
	})
})

// startNATS starts a NATS server, shut down after the spec.
func startNATS(opts natsserver.Options) *natsserver.Server {
	GinkgoHelper()
	srv, err := natsserver.Start(opts)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(srv.Shutdown)
	return srv
}

// routerLog records every router.* message one subscriber sees, in the order it sees them.
type routerLog struct {
	mu   sync.Mutex
	msgs []routerMsg
}

type routerMsg struct {
	subject string
	reg     gorouter.Registration
}

// watchRouter subscribes a new connection to url (with opts, e.g. nats.UserInfo) to router.*
// and records what arrives from then on.
func watchRouter(url string, opts ...nats.Option) *routerLog {
	GinkgoHelper()
	nc, err := nats.Connect(url, opts...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(nc.Close)
	l := &routerLog{}
	_, err = nc.Subscribe("router.*", func(m *nats.Msg) {
		var reg gorouter.Registration
		if m.Subject == gorouter.SubjectRegister || m.Subject == gorouter.SubjectUnregister {
			if err := json.Unmarshal(m.Data, &reg); err != nil {
				reg.Host = "unreadable: " + err.Error()
			}
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		l.msgs = append(l.msgs, routerMsg{subject: m.Subject, reg: reg})
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(nc.Flush()).To(Succeed())
	return l
}

// mark is a position in the log: since(mark, ...) is what arrived after it.
func (l *routerLog) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.msgs)
}

// since are the registrations of subject that arrived after mark, oldest first.
func (l *routerLog) since(mark int, subject string) []gorouter.Registration {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []gorouter.Registration{}
	for _, m := range l.msgs[mark:] {
		if m.subject == subject {
			out = append(out, m.reg)
		}
	}
	return out
}

// sinceAll are the register and unregister messages after mark, oldest first, as
// "<subject> <private_instance_id> <private_instance_index> <uris>".
func (l *routerLog) sinceAll(mark int) []string {
	out := []string{}
	for _, m := range l.orderedSince(mark) {
		out = append(out, m.subject+" "+m.reg.PrivateInstanceID+" "+m.reg.PrivateInstanceIndex+" "+strings.Join(m.reg.URIs, ","))
	}
	return out
}

// count is how many registrations equal to reg of subject arrived after mark.
func (l *routerLog) count(mark int, subject string, reg gorouter.Registration) int {
	n := 0
	for _, r := range l.since(mark, subject) {
		if reflect.DeepEqual(r, reg) {
			n++
		}
	}
	return n
}

// wantRegistration is the exact router.register of pod, the app's instance index, on port
// 8080 for uris (the fixture's CF identity).
func wantRegistration(a *app, pod corev1.Pod, index int, uris ...string) gorouter.Registration {
	return gorouter.Registration{
		Host:                 pod.Status.PodIP,
		Port:                 8080,
		URIs:                 uris,
		App:                  "app-" + a.guid,
		PrivateInstanceID:    string(pod.UID),
		PrivateInstanceIndex: strconv.Itoa(index),
		Tags: map[string]string{
			"app_id": "app-" + a.guid, "app_name": "Dora The App",
			"space_id": "space-1", "space_name": "dev",
			"organization_id": "org-1", "organization_name": "acme",
			"process_id": a.guid, "process_type": "web",
			"process_instance_id": string(pod.UID), "instance_id": strconv.Itoa(index),
			"source_id": "app-" + a.guid, "component": "opi",
		},
	}
}

// natsRegistrable says whether pod is Ready with an IP and not being deleted: what opi registers.
func natsRegistrable(pod corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.PodIP == "" {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// wantTable is the registration of every live instance of a, each at its index (livePodNames'
// order, opi's), once all n are Ready; nil before.
func wantTable(ns string, a *app, n int, uris ...string) []gorouter.Registration {
	byName := map[string]corev1.Pod{}
	for _, p := range pods(ns, a) {
		byName[p.Name] = p
	}
	names := livePodNames(ns, a)
	if len(names) != n {
		return nil
	}
	out := []gorouter.Registration{}
	for i, name := range names {
		pod := byName[name]
		if !natsRegistrable(pod) {
			return nil
		}
		out = append(out, wantRegistration(a, pod, i, uris...))
	}
	return out
}

// expectTableRegistered waits until every live instance of a (n of them, all Ready) has had
// its exact router.register after mark, and returns the registrations.
func expectTableRegistered(l *routerLog, mark int, ns string, a *app, n int, uris ...string) []gorouter.Registration {
	GinkgoHelper()
	var want []gorouter.Registration
	Eventually(func(g Gomega) {
		want = wantTable(ns, a, n, uris...)
		g.Expect(want).To(HaveLen(n), "%d Ready instances", n)
		g.Expect(l.since(mark, gorouter.SubjectRegister)).To(ContainElements(want))
	}).Should(Succeed())
	return want
}

// endpointOf is what gorouter matches an unregister by, and the instance: host, port, URIs and
// private_instance_id.
func endpointOf(r gorouter.Registration) gorouter.Registration {
	return gorouter.Registration{Host: r.Host, Port: r.Port, URIs: r.URIs, PrivateInstanceID: r.PrivateInstanceID}
}

func endpointsOf(regs []gorouter.Registration) []gorouter.Registration {
	out := []gorouter.Registration{}
	for _, r := range regs {
		out = append(out, endpointOf(r))
	}
	return out
}

// natsConfig writes an opi config file with nats.default_register_interval set to interval:
// with a long one, every full re-send the specs see has a cause other than the interval.
func natsConfig(interval string) string {
	GinkgoHelper()
	path := filepath.Join(GinkgoT().TempDir(), "opi.yml")
	Expect(os.WriteFile(path, []byte("nats:\n  default_register_interval: "+interval+"\n"), 0o600)).To(Succeed())
	return path
}

// natsSent is opi's own count of the messages of subject it handed to NATS (its /metrics).
func natsSent(o *opiServer, subject string) float64 {
	GinkgoHelper()
	status, body := o.call("GET", "/metrics", "")
	Expect(status).To(Equal(http.StatusOK))
	prefix := `opi_nats_messages_sent_total{subject="` + subject + `"} `
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			n, err := strconv.ParseFloat(v, 64)
			Expect(err).NotTo(HaveOccurred())
			return n
		}
	}
	return 0
}

// scaleInstances sends CC's update of a's instances.
func scaleInstances(o *opiServer, a *app, n int, annotation string) {
	GinkgoHelper()
	status, body := o.call("POST", "/apps/"+a.processGUID(), updateBody(a, n, annotation))
	Expect(status).To(Equal(http.StatusOK), body)
}

// replaceRoutes sends CC's update of a's cf-router routes.
func replaceRoutes(o *opiServer, a *app, annotation, routes string) {
	GinkgoHelper()
	update := map[string]any{"annotation": annotation, "routes": map[string]any{"cf-router": json.RawMessage(routes)}}
	status, body := o.call("POST", "/apps/"+a.processGUID(), fixture.UpdateLRP(a.guid, a.version, update).JSON())
	Expect(status).To(Equal(http.StatusOK), body)
}

// setPodReady patches the pod's Ready condition (and ContainersReady) on the status
// subresource with kubectl, as a kubelet whose readiness probe changed would. kwok's fast
// pod-ready stage matches only Pending pods, so a Running pod keeps what is written.
func setPodReady(ns, name string, ready bool) {
	GinkgoHelper()
	status := "False"
	if ready {
		status = "True"
	}
	patch := `{"status":{"conditions":[{"type":"Ready","status":"` + status + `"},{"type":"ContainersReady","status":"` + status + `"}]}}`
	kubectl("patch", "pod", "-n", ns, name, "--subresource=status", "--type=strategic", "-p", patch)
}

var _ = Describe("Routing nats: the table follows the instances", func() {
	var (
		srv *natsserver.Server
		ns  string
		a   *app
	)

	BeforeEach(func() {
		var err error
		srv, err = natsserver.Start(natsserver.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(srv.Shutdown)
		ns = newNamespace()
		a = newApp()
	})

	It("registers each new instance on a scale up and unregisters each removed one on a scale down", func() {
		l := watchRouter(srv.URL())
		o := startOpi(ns, "--routing", "nats", "--nats-url", srv.URL(), "--config", natsConfig("10m"))
		a.instances = 1
		desire(o, a)
		first := expectTableRegistered(l, 0, ns, a, 1, "dora.example.com")
		Expect(first[0].PrivateInstanceIndex).To(Equal("0"))

		// opi ranks a Deployment's pods by creation time, in whole seconds, then by name: the new
		// pods rank after the first one (indexes 1 and 2) when they are created in a later second.
		created := pods(ns, a)[0].CreationTimestamp.Time
		Eventually(time.Now).Should(BeTemporally(">=", created.Add(time.Second)))

		By("1 → 3")
		mark := l.mark()
		scaleInstances(o, a, 3, "1700000001.0")
		three := expectTableRegistered(l, 0, ns, a, 3, "dora.example.com")
		added := []gorouter.Registration{}
		for _, r := range three {
			if r.PrivateInstanceID != first[0].PrivateInstanceID {
				added = append(added, r)
				Expect(r.Host).NotTo(Equal(first[0].Host), "each instance its own pod IP")
			}
		}
		Expect(added).To(HaveLen(2))
		Expect(l.since(mark, gorouter.SubjectRegister)).To(ContainElements(added), "the new instances registered on the scale up")
		Expect([]string{added[0].PrivateInstanceIndex, added[1].PrivateInstanceIndex}).To(ConsistOf("1", "2"))
		Expect(l.since(mark, gorouter.SubjectRegister)).NotTo(ContainElement(HaveField("PrivateInstanceID", first[0].PrivateInstanceID)),
			"the first instance keeps its registration")
		Expect(l.since(mark, gorouter.SubjectUnregister)).To(BeEmpty())

		By("3 → 1")
		mark = l.mark()
		scaleInstances(o, a, 1, "1700000002.0")
		one := expectTableRegistered(l, 0, ns, a, 1, "dora.example.com")
		removed := []gorouter.Registration{}
		for _, r := range three {
			if r.PrivateInstanceID != one[0].PrivateInstanceID {
				removed = append(removed, endpointOf(r))
			}
		}
		Expect(removed).To(HaveLen(2))
		Eventually(func() []gorouter.Registration {
			return endpointsOf(l.since(mark, gorouter.SubjectUnregister))
		}).Should(ConsistOf(removed))
	})

	It("unregisters the URIs an update drops at once and registers the new ones, exact", func() {
		l := watchRouter(srv.URL())
		o := startOpi(ns, "--routing", "nats", "--nats-url", srv.URL(), "--config", natsConfig("10m"))
		a.instances = 1
		desire(o, a)
		old := expectTableRegistered(l, 0, ns, a, 1, "dora.example.com")[0]

		By("replacing the route's URIs")
		mark := l.mark()
		replaceRoutes(o, a, "1700000001.0", `[{"hostname":"new.example.com","port":8080}]`)
		Eventually(func() []gorouter.Registration { return l.since(mark, gorouter.SubjectUnregister) }).Should(Equal([]gorouter.Registration{old}))
		replaced := expectTableRegistered(l, mark, ns, a, 1, "new.example.com")[0]
		Expect(l.sinceAll(mark)).To(Equal([]string{
			"router.unregister " + old.PrivateInstanceID + " 0 dora.example.com",
			"router.register " + old.PrivateInstanceID + " 0 new.example.com",
		}), "the old URI goes first")

		By("adding a second route with a path")
		mark = l.mark()
		replaceRoutes(o, a, "1700000002.0", `[{"hostname":"new.example.com","port":8080},{"hostname":"example.com/path","port":8080}]`)
		both := expectTableRegistered(l, mark, ns, a, 1, "new.example.com", "example.com/path")[0]
		Expect(l.sinceAll(mark)).To(Equal([]string{"router.register " + old.PrivateInstanceID + " 0 new.example.com,example.com/path"}))

		By("removing the routes")
		mark = l.mark()
		replaceRoutes(o, a, "1700000003.0", `[]`)
		Eventually(func() []gorouter.Registration { return l.since(mark, gorouter.SubjectUnregister) }).Should(Equal([]gorouter.Registration{both}))
		Expect(l.since(mark, gorouter.SubjectRegister)).To(BeEmpty())
		Expect(replaced.URIs).To(Equal([]string{"new.example.com"}))
	})

	It("unregisters an instance that stops being Ready and registers it again when it is Ready again", func() {
		l := watchRouter(srv.URL())
		o := startOpi(ns, "--routing", "nats", "--nats-url", srv.URL(), "--config", natsConfig("10m"))
		a.instances = 1
		desire(o, a)
		reg := expectTableRegistered(l, 0, ns, a, 1, "dora.example.com")[0]
		name := livePodNames(ns, a)[0]

		By("Ready=False on the pod's status (kubectl patch --subresource=status)")
		mark := l.mark()
		setPodReady(ns, name, false)
		Eventually(func() []gorouter.Registration { return l.since(mark, gorouter.SubjectUnregister) }).Should(Equal([]gorouter.Registration{reg}))
		Expect(l.since(mark, gorouter.SubjectRegister)).To(BeEmpty())
		Expect(kubectl("get", "pod", "-n", ns, name, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)).To(Equal("False"), "kwok left the condition as written")

		By("Ready=True again")
		mark = l.mark()
		setPodReady(ns, name, true)
		Eventually(func() []gorouter.Registration { return l.since(mark, gorouter.SubjectRegister) }).Should(Equal([]gorouter.Registration{reg}))
		Expect(l.since(mark, gorouter.SubjectUnregister)).To(BeEmpty())
	})

	It("unregisters the pod of an instance CC stops and registers its replacement", func() {
		l := watchRouter(srv.URL())
		o := startOpi(ns, "--routing", "nats", "--nats-url", srv.URL(), "--config", natsConfig("10m"))
		desire(o, a) // two instances
		before := expectTableRegistered(l, 0, ns, a, 2, "dora.example.com")
		stopped := before[0]
		Expect(stopped.PrivateInstanceIndex).To(Equal("0"))

		mark := l.mark()
		status, body := o.call("PUT", a.path()+"/stop/0", "")
		Expect(status).To(Equal(http.StatusOK), body)
		Eventually(func() []gorouter.Registration { return l.since(mark, gorouter.SubjectUnregister) }).Should(Equal([]gorouter.Registration{stopped}))
		after := expectTableRegistered(l, 0, ns, a, 2, "dora.example.com")
		var replacement gorouter.Registration
		ids := []string{}
		for _, r := range after {
			ids = append(ids, r.PrivateInstanceID)
			if r.PrivateInstanceID != before[1].PrivateInstanceID {
				replacement = r
			}
		}
		Expect(ids).NotTo(ContainElement(stopped.PrivateInstanceID))
		Expect(ids).To(ContainElement(before[1].PrivateInstanceID), "the other instance stays")
		Expect(l.since(mark, gorouter.SubjectRegister)).To(ContainElement(replacement), "the replacement registered after the stop")
		Expect(l.since(mark, gorouter.SubjectUnregister)).To(HaveLen(1), "only the stopped instance is unregistered")
	})
})

// readyzStatus is opi's /readyz status (0 when it does not answer).
func readyzStatus(o *opiServer) int {
	resp, err := o.httpClient().Get(o.URL + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// quickLeaseFlags make a killed leader's Lease taken over within seconds.
var quickLeaseFlags = []string{"--leader-lease-duration", "4s", "--leader-renew-deadline", "3s", "--leader-retry-period", "1s"}

var _ = Describe("Routing nats: the table kept alive", func() {
	var (
		ns string
		a  *app
	)

	BeforeEach(func() {
		ns = newNamespace()
		a = newApp() // two instances
	})

	It("re-registers every instance at once on a router.start, then again at the interval it announced", func() {
		srv := startNATS(natsserver.Options{})
		l := watchRouter(srv.URL())
		// A default interval far beyond the spec: every re-send seen is the router.start's.
		o := startOpi(ns, "--routing", "nats", "--nats-url", srv.URL(), "--config", natsConfig("10m"))
		desire(o, a)
		want := expectTableRegistered(l, 0, ns, a, 2, "dora.example.com")

		pub, err := nats.Connect(srv.URL())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(pub.Close)
		mark := l.mark()
		Expect(pub.Publish(gorouter.SubjectStart, []byte(`{"id":"gorouter-test","hosts":["127.0.0.1"],"minimumRegisterIntervalInSeconds":1,"pruneThresholdInSeconds":120}`))).To(Succeed())
		Expect(pub.Flush()).To(Succeed())

		By("the whole table at once")
		Eventually(func() []gorouter.Registration { return l.since(mark, gorouter.SubjectRegister) }).Should(ContainElements(want))
		By("then every announced second: at least two re-sends of each registration")
		Eventually(func(g Gomega) {
			for _, w := range want {
				g.Expect(l.count(mark, gorouter.SubjectRegister, w)).To(BeNumerically(">=", 3), "re-sends of %s", w.PrivateInstanceID)
			}
		}, 30*time.Second).Should(Succeed())
		Expect(l.since(mark, gorouter.SubjectUnregister)).To(BeEmpty())
		Expect(l.since(mark, gorouter.SubjectRegister)).To(HaveEach(BeElementOf(want)), "nothing but the table")
	})

	It("sends the whole table again when NATS is back after a restart, and stays ready while it is down", func() {
		users := map[string]string{"opi": "opi-secret", "watcher": "watcher-secret"}
		srv := startNATS(natsserver.Options{Users: users})
		watcher := nats.UserInfo("watcher", "watcher-secret")
		l := watchRouter(srv.URL(), watcher)
		opiURL := "nats://opi:opi-secret@" + strings.TrimPrefix(srv.URL(), "nats://")
		o := startOpi(ns, "--routing", "nats", "--nats-url", opiURL, "--config", natsConfig("10m"))
		desire(o, a)
		want := expectTableRegistered(l, 0, ns, a, 2, "dora.example.com")

		By("NATS down: opi stays ready")
		srv.Shutdown()
		Eventually(o.Logs).Should(ContainSubstring("nats-disconnected"))
		Consistently(func() int { return readyzStatus(o) }, 3*time.Second, 200*time.Millisecond).Should(Equal(http.StatusOK))

		// NATS comes back refusing opi's user until a fresh subscriber listens, so that the
		// subscriber cannot miss opi's reconnect.
		Expect(srv.SetUsers(map[string]string{"watcher": "watcher-secret"})).To(Succeed())
		Expect(srv.Restart()).To(Succeed())
		fresh := watchRouter(srv.URL(), watcher)
		Expect(readyzStatus(o)).To(Equal(http.StatusOK))
		Expect(srv.SetUsers(users)).To(Succeed())

		By("the reconnect re-sending the table, without a new desire")
		Expect(expectTableRegistered(fresh, 0, ns, a, 2, "dora.example.com")).To(Equal(want))
		Expect(fresh.since(0, gorouter.SubjectRegister)).To(HaveEach(BeElementOf(want)))
		Expect(fresh.since(0, gorouter.SubjectUnregister)).To(BeEmpty())
		Expect(o.Logs()).To(ContainSubstring("nats-reconnected"))
		Expect(readyzStatus(o)).To(Equal(http.StatusOK))
	})

	It("re-registers every instance at once when a killed opi is started again", func() {
		srv := startNATS(natsserver.Options{})
		l := watchRouter(srv.URL())
		o := startOpi(ns, append([]string{"--routing", "nats", "--nats-url", srv.URL(), "--config", natsConfig("10m")}, quickLeaseFlags...)...)
		desire(o, a)
		want := expectTableRegistered(l, 0, ns, a, 2, "dora.example.com")

		mark := l.mark()
		o.kill()
		o.start()
		Expect(expectTableRegistered(l, mark, ns, a, 2, "dora.example.com")).To(Equal(want))
		Expect(l.since(mark, gorouter.SubjectRegister)).To(HaveEach(BeElementOf(want)))
		Expect(natsSent(o, gorouter.SubjectRegister)).To(BeNumerically(">=", 2), "the new process sent them")
	})

	It("sends only from the leader of two replicas, and the new leader sends everything at once after a hand-over", func() {
		srv := startNATS(natsserver.Options{})
		l := watchRouter(srv.URL())
		kubeconfig := restrictedKubeconfig(ns)
		args := append([]string{"--create-namespace=false", "--routing", "nats", "--nats-url", srv.URL(), "--config", natsConfig("10m")}, quickLeaseFlags...)
		first := startOpiWith(kubeconfig, ns, args...)
		second := startOpiWith(kubeconfig, ns, args...)
		desire(first, a)
		want := expectTableRegistered(l, 0, ns, a, 2, "dora.example.com")

		leading := func(o *opiServer) bool { return strings.Contains(o.Logs(), `leader-election.leading"`) }
		Eventually(func() int {
			n := 0
			for _, o := range []*opiServer{first, second} {
				if leading(o) {
					n++
				}
			}
			return n
		}).Should(Equal(1))
		leader, follower := first, second
		if !leading(first) {
			leader, follower = second, first
		}

		By("only the leader sending, one table")
		Expect(natsSent(leader, gorouter.SubjectRegister)).To(BeNumerically(">=", 2))
		Consistently(func() float64 {
			return natsSent(follower, gorouter.SubjectRegister) + natsSent(follower, gorouter.SubjectGreet)
		}, 3*time.Second, 500*time.Millisecond).Should(BeZero())
		for _, w := range want {
			Expect(l.count(0, gorouter.SubjectRegister, w)).To(Equal(1), "one registration of %s", w.PrivateInstanceID)
		}

		By("the leader killed: the other takes over and sends the whole table")
		mark := l.mark()
		leader.kill()
		Expect(expectTableRegistered(l, mark, ns, a, 2, "dora.example.com")).To(Equal(want))
		Expect(l.since(mark, gorouter.SubjectRegister)).To(HaveEach(BeElementOf(want)))
		Expect(leading(follower)).To(BeTrue())
		Expect(natsSent(follower, gorouter.SubjectRegister)).To(BeNumerically(">=", 2))
		leader.start() // back as a follower, so that the spec's clean-up stops it as usual
	})
})

// orderedSince are the register and unregister messages after mark, oldest first.
func (l *routerLog) orderedSince(mark int) []routerMsg {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []routerMsg{}
	for _, m := range l.msgs[mark:] {
		if m.subject == gorouter.SubjectRegister || m.subject == gorouter.SubjectUnregister {
			out = append(out, m)
		}
	}
	return out
}

// expectUnregisteredFirst waits for an unregister of each of gone's endpoints after mark, and
// checks that each came before the first register after mark: the new term's first full send
// begins with them.
func expectUnregisteredFirst(l *routerLog, mark int, gone []gorouter.Registration) {
	GinkgoHelper()
	Eventually(func() []gorouter.Registration {
		return endpointsOf(l.since(mark, gorouter.SubjectUnregister))
	}, 60*time.Second).Should(ContainElements(gone))
	Eventually(func() []gorouter.Registration { return l.since(mark, gorouter.SubjectRegister) }, 60*time.Second).ShouldNot(BeEmpty())
	msgs := l.orderedSince(mark)
	firstRegister := slices.IndexFunc(msgs, func(m routerMsg) bool { return m.subject == gorouter.SubjectRegister })
	for _, g := range gone {
		at := slices.IndexFunc(msgs, func(m routerMsg) bool {
			return m.subject == gorouter.SubjectUnregister && reflect.DeepEqual(endpointOf(m.reg), g)
		})
		Expect(at).To(BeNumerically("<", firstRegister), "the unregister of %s %v before the first register", g.Host, g.URIs)
	}
}

// withURIs is r's endpoint with uris.
func withURIs(r gorouter.Registration, uris ...string) gorouter.Registration {
	e := endpointOf(r)
	e.URIs = uris
	return e
}

// Changes made with kubectl alone, as happen while no opi leads: pods go, routes change, an
// LRP goes.
func deletePodNamed(ns, name string) {
	GinkgoHelper()
	kubectl("-n", ns, "delete", "pod", name)
}

func annotateRoutes(ns string, a *app, routes string) {
	GinkgoHelper()
	kubectl("-n", ns, "annotate", "deployments,statefulsets", "-l", selector(a), "--overwrite", "opi-bridge.io/routes="+routes)
}

// deleteWorkload deletes a's workload, its ReplicaSets and its pods itself rather than leaving
// them to the garbage collector, whose pace on a loaded machine is no part of what the specs
// check (a pod made a second before its Deployment went was once left for over a minute).
func deleteWorkload(ns string, a *app) {
	GinkgoHelper()
	kubectl("-n", ns, "delete", "deployments,statefulsets,replicasets", "-l", selector(a))
	kubectl("-n", ns, "delete", "pods", "-l", selector(a))
	Eventually(func() []corev1.Pod { return pods(ns, a) }, 60*time.Second).Should(BeEmpty())
}

// podNameOf is the name of the pod of a whose UID is uid.
func podNameOf(ns string, a *app, uid string) string {
	GinkgoHelper()
	for _, p := range pods(ns, a) {
		if string(p.UID) == uid {
			return p.Name
		}
	}
	Fail("no pod " + uid)
	return ""
}

var _ = Describe("Routing nats: routes never outlive their instances", func() {
	var ns string

	BeforeEach(func() {
		ns = newNamespace()
	})

	It("unregisters, first in the next leader's first send, what went while no opi ran after the only one was SIGKILLed", func() {
		srv, err := natsserver.Start(natsserver.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(srv.Shutdown)
		l := watchRouter(srv.URL())
		o := startOpi(ns, append([]string{"--routing", "nats", "--nats-url", srv.URL(), "--config", natsConfig("10m")}, quickLeaseFlags...)...)
		a, b := newApp(), newApp() // a: two instances
		b.instances = 1
		desire(o, a)
		desire(o, b)
		regsA := expectTableRegistered(l, 0, ns, a, 2, "dora.example.com")
		regsB := expectTableRegistered(l, 0, ns, b, 1, "dora.example.com")

		By("SIGKILL: nothing handed over; then a pod deleted, a's routes changed, b deleted")
		o.kill()
		deletePodNamed(ns, podNameOf(ns, a, regsA[0].PrivateInstanceID))
		annotateRoutes(ns, a, `[{"hostname":"new.example.com","port":8080}]`)
		deleteWorkload(ns, b)

		By("the next leader")
		mark := l.mark()
		o.start()
		expectUnregisteredFirst(l, mark, []gorouter.Registration{
			withURIs(regsA[0], "dora.example.com"), // its pod is gone
			withURIs(regsA[1], "dora.example.com"), // the URI is gone
			withURIs(regsB[0], "dora.example.com"), // its LRP is gone
		})
		Eventually(func() []string {
			return strings.Fields(kubectl("-n", ns, "get", "configmaps", "-l", "opi-bridge.io/routes-record=true", "-o", "name"))
		}, 60*time.Second).Should(HaveLen(1), "b's record deleted once unregistered; a's kept")
	})

	It("unregisters what went while NATS was down and opi was SIGKILLed, first in the next leader's first send once NATS is back", func() {
		users := map[string]string{"opi": "opi-secret", "watcher": "watcher-secret"}
		srv, err := natsserver.Start(natsserver.Options{Users: users})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(srv.Shutdown)
		watcher := nats.UserInfo("watcher", "watcher-secret")
		l := watchRouter(srv.URL(), watcher)
		opiURL := "nats://opi:opi-secret@" + strings.TrimPrefix(srv.URL(), "nats://")
		o := startOpi(ns, append([]string{"--routing", "nats", "--nats-url", opiURL, "--config", natsConfig("10m")}, quickLeaseFlags...)...)
		a := newApp()
		desire(o, a)
		regs := expectTableRegistered(l, 0, ns, a, 2, "dora.example.com")

		By("NATS down; opi SIGKILLed; a pod deleted and the routes changed; the next opi started, NATS still down")
		srv.Shutdown()
		Eventually(o.Logs).Should(ContainSubstring("nats-disconnected"))
		o.kill()
		deletePodNamed(ns, podNameOf(ns, a, regs[0].PrivateInstanceID))
		annotateRoutes(ns, a, `[{"hostname":"new.example.com","port":8080}]`)
		o.start()
		Eventually(o.Logs, 30*time.Second).Should(ContainSubstring("unregistering-earlier-terms"))

		By("NATS back")
		Expect(srv.SetUsers(map[string]string{"watcher": "watcher-secret"})).To(Succeed())
		Expect(srv.Restart()).To(Succeed())
		fresh := watchRouter(srv.URL(), watcher)
		Expect(srv.SetUsers(users)).To(Succeed())
		expectUnregisteredFirst(fresh, 0, []gorouter.Registration{
			withURIs(regs[0], "dora.example.com"),
			withURIs(regs[1], "dora.example.com"),
		})
	})

	It("unregisters, first in the standby's first send once it holds the Lease, what went after the leader of two replicas was SIGKILLed", func() {
		srv, err := natsserver.Start(natsserver.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(srv.Shutdown)
		l := watchRouter(srv.URL())
		kubeconfig := restrictedKubeconfig(ns)
		args := append([]string{"--create-namespace=false", "--routing", "nats", "--nats-url", srv.URL(), "--config", natsConfig("10m")}, quickLeaseFlags...)
		first := startOpiWith(kubeconfig, ns, args...)
		second := startOpiWith(kubeconfig, ns, args...)
		a, b := newApp(), newApp() // a: two instances
		b.instances = 1
		desire(first, a)
		desire(first, b)
		regsA := expectTableRegistered(l, 0, ns, a, 2, "dora.example.com")
		regsB := expectTableRegistered(l, 0, ns, b, 1, "dora.example.com")
		Eventually(func() map[string]string { return routeRecords(ns) }).Should(HaveKey(lrpKey(b)), "b's record written before its register")

		leader, standby := leaderOf(first, second)
		holder := leaseHolder(ns)

		By("SIGKILL the leader; the Lease held for the spec until the changes are made")
		leader.kill()
		holdLease(ns, holder)
		deletePodNamed(ns, podNameOf(ns, a, regsA[0].PrivateInstanceID))
		annotateRoutes(ns, a, `[{"hostname":"new.example.com","port":8080}]`)
		deleteWorkload(ns, b)
		// The standby's caches have the changes once they have b's deletion, the last of them
		// on the same watch as a's new routes.
		Eventually(func() int { status, _ := standby.call("GET", b.path(), ""); return status }).Should(Equal(http.StatusNotFound))
		Expect(leading(standby)).To(BeFalse(), "the standby has not taken the Lease")
		Expect(natsSent(standby, gorouter.SubjectRegister) + natsSent(standby, gorouter.SubjectUnregister)).To(BeZero())

		By("the Lease released: the standby takes it")
		mark := l.mark()
		releaseHeldLease(ns)
		expectUnregisteredFirst(l, mark, []gorouter.Registration{
			withURIs(regsA[0], "dora.example.com"), // its pod is gone
			withURIs(regsA[1], "dora.example.com"), // the URI is gone
			withURIs(regsB[0], "dora.example.com"), // its LRP is gone
		})
		Expect(leading(standby)).To(BeTrue())
		Expect(natsSent(standby, gorouter.SubjectUnregister)).To(BeNumerically(">=", 3), "the standby sent them")
		expectTableRegistered(l, mark, ns, a, 2, "new.example.com")
		Eventually(func() map[string]string { return routeRecords(ns) }, 60*time.Second).Should(
			And(HaveKey(lrpKey(a)), Not(HaveKey(lrpKey(b)))), "b's record deleted once unregistered; a's kept")
		leader.start() // back as a follower, so that the spec's clean-up stops it as usual
	})
})

// leading says whether o has logged that it holds the Lease.
func leading(o *opiServer) bool { return strings.Contains(o.Logs(), `leader-election.leading"`) }

// leaderOf waits until exactly one of two replicas leads and returns it and the other.
func leaderOf(first, second *opiServer) (leader, standby *opiServer) {
	GinkgoHelper()
	Eventually(func() []bool { return []bool{leading(first), leading(second)} }).Should(Or(Equal([]bool{true, false}), Equal([]bool{false, true})))
	if leading(first) {
		return first, second
	}
	return second, first
}

// specHolder is the identity the spec holds opi's Lease under.
const specHolder = "integration-spec"

func leaseHolder(ns string) string {
	GinkgoHelper()
	lease, err := kube.CoordinationV1().Leases(ns).Get(context.Background(), "opi-leader", metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
	return *lease.Spec.HolderIdentity
}

// holdLease takes opi's Lease from holder (a killed leader whose Lease has not expired yet) for
// an hour, as another replica would: while it is held, no replica of opi leads. The update fails
// with a conflict if the Lease changed since the Get, and the Get fails the spec if holder no
// longer holds it, so the standby cannot have led in between.
func holdLease(ns, holder string) {
	GinkgoHelper()
	leases := kube.CoordinationV1().Leases(ns)
	lease, err := leases.Get(context.Background(), "opi-leader", metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(lease.Spec.HolderIdentity).To(HaveValue(Equal(holder)), "the killed leader's Lease still unexpired")
	id, seconds, now := specHolder, int32(3600), metav1.NewMicroTime(time.Now())
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime = &id, &seconds, &now
	_, err = leases.Update(context.Background(), lease, metav1.UpdateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

// releaseHeldLease gives the spec's Lease up as a leader does on release: any replica takes it
// at its next retry.
func releaseHeldLease(ns string) {
	GinkgoHelper()
	leases := kube.CoordinationV1().Leases(ns)
	lease, err := leases.Get(context.Background(), "opi-leader", metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(lease.Spec.HolderIdentity).To(HaveValue(Equal(specHolder)))
	id, seconds, now := "", int32(1), metav1.NewMicroTime(time.Now())
	lease.Spec.HolderIdentity, lease.Spec.LeaseDurationSeconds, lease.Spec.RenewTime = &id, &seconds, &now
	_, err = leases.Update(context.Background(), lease, metav1.UpdateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

func lrpKey(a *app) string { return a.guid + "/" + a.version }

// routeRecords are opi's route record ConfigMaps, name by LRP key, as kubectl shows them.
func routeRecords(ns string) map[string]string {
	var list corev1.ConfigMapList
	kubectlJSON(&list, "get", "configmaps", "-n", ns, "-l", "opi-bridge.io/routes-record=true")
	out := map[string]string{}
	for _, cm := range list.Items {
		out[cm.Data["lrp"]] = cm.Name
	}
	return out
}
