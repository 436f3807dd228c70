package integration_test

import (
	"bufio"
	"maps"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/testsupport/fixture"
)

// apiRequests is opi's own count of the API server requests it made, from GET /metrics, without
// the informers' long-running watches (they may reconnect at any time) and the leader election's
// Lease renewals (every retry period, whatever the requests).
func apiRequests(o *opiServer) map[string]float64 {
	status, body := o.call("GET", "/metrics", "")
	Expect(status).To(Equal(http.StatusOK))
	counts := map[string]float64{}
	scanner := bufio.NewScanner(strings.NewReader(body))
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.HasPrefix(line, "opi_kube_api_requests_total{") || strings.Contains(line, `verb="watch"`) || strings.Contains(line, `resource="leases"`) {
			continue
		}
		i := strings.LastIndex(line, " ")
		v, err := strconv.ParseFloat(line[i+1:], 64)
		Expect(err).NotTo(HaveOccurred())
		counts[line[:i]] = v
	}
	return counts
}

// settledAPIRequests is apiRequests once opi's background work for what was desired is over:
// the route objects' controller writes an app's EndpointSlices when its instances are Ready,
// after opi reports them Running, and a sync that finds its cache behind a write of its own
// makes the write again (refused as existing). Two readings a second apart agree.
func settledAPIRequests(o *opiServer) map[string]float64 {
	var last map[string]float64
	Eventually(func() bool {
		now := apiRequests(o)
		settled := last != nil && maps.Equal(now, last)
		last = now
		return settled
	}).WithPolling(time.Second).Should(BeTrue(), "opi's API requests keep changing with no request to opi")
	return last
}

var _ = Describe("Reads", func() {
	It("serve list, get and instances from opi's caches: no API server request per call", func() {
		ns := newNamespace()
		o := startOpi(ns)
		a := newApp()
		desire(o, a)
		Eventually(allRunning(o, a)).Should(Equal(running(2)))

		before := settledAPIRequests(o)
		Expect(before).To(HaveKey(ContainSubstring(`verb="create"`)), "the counter must see opi's writes")
		for range 20 {
			status, _ := o.call("GET", "/apps", "")
			Expect(status).To(Equal(http.StatusOK))
			status, _ = o.call("GET", a.path(), "")
			Expect(status).To(Equal(http.StatusOK))
			Expect(instances(o, a).Instances).To(HaveLen(2))
			status, _ = o.call("GET", "/apps/"+fixture.NewGUID()+"/"+fixture.NewGUID(), "")
			Expect(status).To(Equal(http.StatusNotFound))
		}
		Expect(apiRequests(o)).To(Equal(before))
	})
})

var _ = Describe("Least privilege", func() {
	It("gives opi's identity rights in its own namespace only", func() {
		ns := newNamespace()
		kubeconfig := restrictedKubeconfig(ns)
		canI := func(args ...string) string {
			cmd := exec.Command(filepath.Join(cluster.BinDir(), "kubectl"), append([]string{"--kubeconfig", kubeconfig, "auth", "can-i"}, args...)...)
			out, _ := cmd.Output() // can-i exits 1 for "no"
			return strings.TrimSpace(string(out))
		}
		Expect(canI("create", "deployments", "-n", ns)).To(Equal("yes"))
		Expect(canI("create", "statefulsets", "-n", ns)).To(Equal("yes"))
		Expect(canI("update", "statefulsets", "--subresource", "finalizers", "-n", ns)).To(Equal("yes"))
		Expect(canI("update", "statefulsets", "-n", ns)).To(Equal("no"))
		Expect(canI("delete", "pods", "-n", ns)).To(Equal("yes"))
		Expect(canI("create", "deployments", "-n", "default")).To(Equal("no"))
		Expect(canI("create", "statefulsets", "-n", "default")).To(Equal("no"))
		Expect(canI("get", "secrets", "-n", "kube-system")).To(Equal("no"))
		Expect(canI("create", "namespaces")).To(Equal("no"))
		Expect(canI("list", "nodes")).To(Equal("no"))
		Expect(canI("create", "pods", "-n", ns)).To(Equal("no"))
	})
})
