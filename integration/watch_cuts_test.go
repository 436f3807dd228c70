package integration_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/opi-bridge/opi/localkube"
	"github.com/opi-bridge/opi/testsupport/tcpproxy"
)

// burstSize and burstWorkers shape the burst of desires below: CC's pushes at a busy moment.
// The count is the one CC's burst was seen to get 503s at (23 of 1,000 before this was fixed).
const (
	burstSize    = 1000
	burstWorkers = 50
	burstCuts    = 3
)

// proxiedKubeconfig writes a copy of kubeconfig whose clusters are reached through a proxy it
// starts in front of the API server, and returns the copy's path and the proxy.
func proxiedKubeconfig(kubeconfig string) (string, *tcpproxy.Proxy) {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	var proxy *tcpproxy.Proxy
	for _, c := range cfg.Clusters {
		server, err := url.Parse(c.Server)
		Expect(err).NotTo(HaveOccurred())
		if proxy == nil {
			proxy, err = tcpproxy.Start(server.Host)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(proxy.Close)
		}
		// TLS passes through the proxy untouched: the API server's certificate names
		// 127.0.0.1, as the proxy's address does.
		server.Host = proxy.Addr()
		c.Server = server.String()
	}
	Expect(proxy).NotTo(BeNil(), "the kubeconfig names no cluster")
	path := kubeconfig + ".proxied"
	Expect(clientcmd.WriteToFile(*cfg, path)).To(Succeed())
	return path, proxy
}

var _ = Describe("A burst of desires while opi's connections to the API server are cut", func() {
	It("answers every desire 202, none 503, and every app is listed and in Kubernetes after", func() {
		ns := newNamespace()
		// A thousand apps are thousands of objects: deleted in the background, as other specs'
		// namespaces are, they kept the controllers busy well into the next specs (the garbage
		// collector's queue delayed a cf restart spec's cleanup past its minute). Once opi has
		// stopped, the spec removes its namespace and waits until that work is done.
		DeferCleanup(removeNamespace, ns)
		kubeconfig, proxy := proxiedKubeconfig(restrictedKubeconfig(ns))
		o := startOpiWith(kubeconfig, ns, "--create-namespace=false")

		apps := make([]*app, burstSize)
		for i := range apps {
			apps[i] = newApp()
			apps[i].instances = 1
		}
		// The connections are cut as the burst passes each quarter: opi's watches end (with
		// every request in flight on their connection) while the API server answers.
		var (
			got     answers
			next    atomic.Int64
			done    atomic.Int64
			cutMu   sync.Mutex
			cutConn []int
		)
		cutAt := func(n int64) bool { return n%(burstSize/(burstCuts+1)) == 0 && n < burstSize }
		var wg sync.WaitGroup
		for range burstWorkers {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < burstSize; i = next.Add(1) - 1 {
					a := apps[i]
					status, body, err := tryCall(o, "PUT", "/apps/"+a.processGUID(), a.body())
					got.add("desire", status, body, err)
					if n := done.Add(1); cutAt(n) {
						cutMu.Lock()
						cutConn = append(cutConn, proxy.CutAll())
						cutMu.Unlock()
					}
				}
			})
		}
		wg.Wait()

		Expect(cutConn).To(HaveLen(burstCuts))
		Expect(cutConn).To(HaveEach(BeNumerically(">", 0)), "each cut ended opi's connections")
		Expect(got.errors).To(BeEmpty())
		Expect(got.codes["desire"]).To(HaveLen(burstSize))
		Expect(got.codes["desire"]).To(HaveEach(http.StatusAccepted))

		list := listed(o)
		st := stateOf(kube, ns)
		for _, a := range apps {
			Expect(list).To(HaveKey(a.processGUID()))
			Expect(st.Deployments).To(HaveKey(a.processGUID()))
		}
		Expect(st.Deployments).To(HaveLen(burstSize))
		Expect(st.Orphans).To(BeEmpty())
		Expect(st.Incomplete).To(BeEmpty())
	})
})

// removeNamespace deletes ns and waits until it is gone, with all it held, and until the
// controller-manager's garbage collector has no entry left queued: the next spec starts on a
// control plane with none of this work left.
func removeNamespace(ns string) {
	ctx := context.Background()
	err := kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	Expect(err).To(Or(Succeed(), Satisfy(apierrors.IsNotFound)))
	Eventually(func() bool {
		_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 5*time.Minute, time.Second).Should(BeTrue(), "namespace %s still there", ns)
	// The garbage collector's queues still hold an entry per dependent of each deleted
	// workload; a later spec's cleanup would wait behind them.
	Eventually(garbageCollectorBacklog, 5*time.Minute, time.Second).Should(BeZero())
}

// garbageCollectorBacklog is how many entries the controller-manager's garbage collector has
// queued (its workqueue_depth gauges), from the controller-manager's own metrics.
func garbageCollectorBacklog(g Gomega) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, err := cluster.Get(ctx, localkube.ControllerManager, "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	total := 0
	for line := range strings.Lines(string(body)) {
		if !strings.HasPrefix(line, `workqueue_depth{name="garbage_collector_`) {
			continue
		}
		fields := strings.Fields(line)
		depth, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		g.Expect(err).NotTo(HaveOccurred(), line)
		total += int(depth)
	}
	return total
}
