package integration_test

import (
	"net/http"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/opi-bridge/opi/localkube"
	lgstandin "github.com/opi-bridge/opi/testsupport/loggregator"
)

// cellLines are the payloads of the CELL envelopes srv received for the instance with uid.
func cellLines(srv *lgstandin.Server, uid string) func() []string {
	return func() []string {
		var out []string
		for _, env := range srv.Envelopes() {
			if env.GetTags()["source_type"] == "CELL" && env.GetTags()["process_instance_id"] == uid {
				out = append(out, string(env.GetLog().GetPayload()))
			}
		}
		return out
	}
}

// livePod is the app's one pod not being deleted.
func livePod(ns string, a *app) corev1.Pod {
	GinkgoHelper()
	var live []corev1.Pod
	Eventually(func() int {
		live = nil
		for _, p := range pods(ns, a) {
			if p.DeletionTimestamp == nil {
				live = append(live, p)
			}
		}
		return len(live)
	}, 60*time.Second, 200*time.Millisecond).Should(Equal(1))
	return live[0]
}

// opiWithLoggregator starts a Loggregator stand-in, and opi in a new namespace sending its
// lifecycle lines there.
func opiWithLoggregator() (*lgstandin.Server, string, *opiServer) {
	GinkgoHelper()
	srv, err := lgstandin.Start(GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(srv.Stop)
	files := srv.ClientFiles()
	ns := newNamespace()
	o := startOpi(ns, "--loggregator-addr", srv.Addr(), "--loggregator-ca", files.CA,
		"--loggregator-cert", files.Cert, "--loggregator-key", files.Key, "--loggregator-server-name", lgstandin.ServerName)
	return srv, ns, o
}

var _ = Describe("Lifecycle lines (CELL) from opi's leader", func() {
	It("sends a cell's lines for an instance created, placed, started, healthy, stopped and destroyed, and the scheduler's reason for one no node can take", func() {
		srv, ns, o := opiWithLoggregator()

		a := newApp()
		a.instances = 1
		desire(o, a)
		Eventually(allRunning(o, a), 60*time.Second).Should(Equal(running(1)))
		pod := livePod(ns, a)
		uid, node := string(pod.UID), pod.Spec.NodeName
		Expect(node).NotTo(BeEmpty())
		Eventually(cellLines(srv, uid), 30*time.Second, 100*time.Millisecond).Should(Equal([]string{
			"Creating instance " + uid,
			"Cell " + node + " creating container for instance " + uid,
			"Cell " + node + " successfully created container for instance " + uid,
			"Container became healthy",
		}))
		var first *loggregator_v2.Envelope
		for _, env := range srv.Envelopes() {
			if env.GetTags()["process_instance_id"] == uid {
				first = env
				break
			}
		}
		Expect(first.GetSourceId()).To(Equal("app-" + a.guid))
		Expect(first.GetInstanceId()).To(Equal("0"))
		Expect(first.GetLog().GetType()).To(Equal(loggregator_v2.Log_OUT))
		Expect(first.GetTags()).To(Equal(map[string]string{
			"source_type": "CELL",
			"app_id":      "app-" + a.guid, "app_name": "Dora The App",
			"space_id": "space-1", "space_name": "dev",
			"organization_id": "org-1", "organization_name": "acme",
			"process_id": a.guid, "process_type": "web", "process_instance_id": uid,
		}))

		big := newApp()
		big.instances = 1
		big.memoryMB = 64 * 1024 // more than any node has
		desire(o, big)
		unplaced := livePod(ns, big)
		bigUID := string(unplaced.UID)
		Eventually(cellLines(srv, bigUID), 60*time.Second, 100*time.Millisecond).Should(HaveExactElements(
			"Creating instance "+bigUID,
			// The words CC gets in placement_error, not the scheduler's report on every node.
			"No cell can place instance "+bigUID+": Insufficient resources: memory",
		))

		stop(o, a)
		Eventually(cellLines(srv, uid), 60*time.Second, 100*time.Millisecond).Should(Equal([]string{
			"Creating instance " + uid,
			"Cell " + node + " creating container for instance " + uid,
			"Cell " + node + " successfully created container for instance " + uid,
			"Container became healthy",
			"Cell " + node + " stopping instance " + uid,
			"Cell " + node + " destroying container for instance " + uid,
			"Cell " + node + " successfully destroyed container for instance " + uid,
		}))

		// Loggregator down: opi stays ready, and the lines wait in the Sender's buffer until it
		// is back.
		srv.Stop()
		c := newApp()
		c.instances = 1
		desire(o, c)
		Eventually(allRunning(o, c), 60*time.Second).Should(Equal(running(1)))
		status, body := o.call("GET", "/readyz", "")
		Expect(status).To(Equal(http.StatusOK), body)
		cUID := string(livePod(ns, c).UID)
		Expect(cellLines(srv, cUID)()).To(BeEmpty())
		Expect(srv.Restart()).To(Succeed())
		Eventually(cellLines(srv, cUID), 60*time.Second, 100*time.Millisecond).Should(ContainElement("Container became healthy"))
	})

	It("sends the exit status and reason of an instance whose container exited, once per exit", func() {
		srv, ns, o := opiWithLoggregator()

		a := newApp()
		a.instances = 1
		// localkube's kwok stage reports such pods crash-looping: restartCount 1, last exit 1 (Error).
		a.extra = map[string]any{"user_defined_annotations": map[string]string{localkube.CrashAnnotation: "true"}}
		desire(o, a)
		uid := string(livePod(ns, a).UID)
		Eventually(cellLines(srv, uid), 60*time.Second, 100*time.Millisecond).Should(ContainElement("Exit status 1 (Error)"))
		Consistently(func() int {
			n := 0
			for _, l := range cellLines(srv, uid)() {
				if l == "Exit status 1 (Error)" {
					n++
				}
			}
			return n
		}, 3*time.Second, 200*time.Millisecond).Should(Equal(1), "one exit, one line")
	})
})
