package integration_test

import (
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/opi-bridge/opi/gorouter"
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
