// Package integration drives the built opi binary over HTTP, as Cloud Controller and curl do,
// against a real local Kubernetes control plane (see localkube), and checks both opi's answers
// and what Kubernetes holds.
package integration_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"

	"github.com/opi-bridge/opi/localkube"
	"github.com/opi-bridge/opi/testsupport/ccstandin"
	"github.com/opi-bridge/opi/testsupport/fixture"
)

func TestIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	RunSpecs(t, "Integration Suite")
}

// nodeMemory is the size of the one simulated node: an app asking for more stays unplaced.
const nodeMemory = "16Gi"

var (
	opiBin  string
	cluster *localkube.Cluster
	kube    kubernetes.Interface
)

var _ = BeforeSuite(func() {
	var err error
	opiBin, err = gexec.Build("github.com/opi-bridge/opi/cmd/opi")
	Expect(err).NotTo(HaveOccurred())
	// `opi agent` execs the opi-agent next to opi (each gexec build has a folder of its own).
	agentBin, err := gexec.Build("github.com/opi-bridge/opi/cmd/opi-agent")
	Expect(err).NotTo(HaveOccurred())
	Expect(os.Rename(agentBin, filepath.Join(filepath.Dir(opiBin), "opi-agent"))).To(Succeed())
	DeferCleanup(gexec.CleanupBuildArtifacts)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The controllers' client rate above the defaults (20 requests/s, burst 30): the specs'
	// bursts (a thousand apps) leave the garbage collector thousands of dependents to delete,
	// at 20 a second minutes of a backlog the next specs' cleanups would wait behind.
	cluster, err = localkube.Start(ctx, localkube.Options{Nodes: 1, NodeMemory: nodeMemory, ControllerQPS: 200, ControllerBurst: 400})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		pids := cluster.PIDs()
		Expect(cluster.Stop()).To(Succeed())
		for _, pid := range pids {
			Expect(syscall.Kill(pid, 0)).To(MatchError(syscall.ESRCH), "process %d outlived the cluster", pid)
		}
	})
	kube = cluster.Clientset()
	Expect(cluster.InstallGatewayAPI(context.Background())).To(Succeed())
})

// opiServer is one running opi binary.
type opiServer struct {
	URL       string
	Namespace string
	session   *gexec.Session
	args      []string
	// client talks to opi; http.DefaultClient unless opi serves TLS.
	client *http.Client
	// env, when set, is opi's whole environment (else it inherits the suite's).
	env []string
}

func (o *opiServer) httpClient() *http.Client {
	if o.client != nil {
		return o.client
	}
	return http.DefaultClient
}

// Logs is everything opi printed so far.
func (o *opiServer) Logs() string {
	return string(o.session.Out.Contents()) + string(o.session.Err.Contents())
}

// startOpi runs `opi connect` for namespace ns as an operator would deploy it: with exactly the
// permissions of deploy/rbac.yaml, not as cluster admin. It waits until opi is ready.
func startOpi(ns string, extraArgs ...string) *opiServer {
	kubeconfig := restrictedKubeconfig(ns)
	return startOpiWith(kubeconfig, ns, append([]string{"--create-namespace=false"}, extraArgs...)...)
}

// startOpiWith runs `opi connect` with the given kubeconfig and the suite's backend
// (OPI_TEST_BACKEND) and waits until it is ready. It allows the local control plane's user
// annotations (the crash specs' localkube.CrashAnnotation) next to CC's prometheus.io/.
func startOpiWith(kubeconfig, ns string, extraArgs ...string) *opiServer {
	addr := freeAddr()
	args := append([]string{"connect", "--kubeconfig", kubeconfig, "--listen", addr, "--namespace", ns, "--backend", testBackend,
		"--user-annotation-prefixes", userAnnotationPrefixes}, extraArgs...)
	o := &opiServer{URL: "http://" + addr, Namespace: ns, args: args}
	o.start()
	DeferCleanup(o.stop)
	return o
}

// userAnnotationPrefixes is the suite's --user-annotation-prefixes.
const userAnnotationPrefixes = "prometheus.io/," + localkube.AnnotationPrefix

// restrictedKubeconfig creates namespace ns, applies deploy/rbac.yaml to it with the real
// kubectl, and returns a kubeconfig holding a token of the opi ServiceAccount it defines.
func restrictedKubeconfig(ns string) string {
	kubeconfig, err := fixture.RestrictedKubeconfig(context.Background(), cluster, ns)
	Expect(err).NotTo(HaveOccurred())
	return kubeconfig
}

func (o *opiServer) start() {
	var err error
	cmd := exec.Command(opiBin, o.args...)
	cmd.Env = o.env
	o.session, err = gexec.Start(cmd, gbytes.NewBuffer(), GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() int {
		resp, err := o.httpClient().Get(o.URL + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}, 60*time.Second).Should(Equal(http.StatusOK), "opi did not become ready; it said:\n%s", o.Logs())
}

func (o *opiServer) stop() {
	if o.session != nil {
		o.session.Terminate().Wait(20 * time.Second)
		Expect(o.session.ExitCode()).To(Equal(0), "opi did not stop cleanly on SIGTERM")
	}
}

// kill ends opi at once, as a crash would.
func (o *opiServer) kill() {
	o.session.Kill().Wait(10 * time.Second)
}

// restart kills opi and starts it again on the same address and namespace.
func (o *opiServer) restart() {
	o.kill()
	o.start()
}

// call sends a request as CC does: a JSON body without a JSON Content-Type.
func (o *opiServer) call(method, path, body string) (int, string) {
	req, err := http.NewRequest(method, o.URL+path, strings.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	if body != "" {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := o.httpClient().Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(b)
}

func freeAddr() string {
	addr, err := localkube.FreeAddr()
	Expect(err).NotTo(HaveOccurred())
	return addr
}

// newNamespace is a fresh namespace name for one test; opi creates it, the test deletes it.
// startCC starts a CC stand-in serving TLS, stopped after the spec (or the container, from a
// BeforeAll).
func startCC() *ccstandin.Server {
	cc, err := ccstandin.Start(ccstandin.Options{TLS: true, Dir: GinkgoT().TempDir(), Log: GinkgoWriter})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cc.Close)
	return cc
}

func newNamespace() string {
	ns := "opi-it-" + rand.String(6)
	DeferCleanup(func() {
		_ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	return ns
}

// kubectl runs the real kubectl of the local control plane, as an operator would.
func kubectl(args ...string) string {
	cmd := exec.Command(filepath.Join(cluster.BinDir(), "kubectl"), append([]string{"--kubeconfig", cluster.Kubeconfig()}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	Expect(cmd.Run()).To(Succeed(), "kubectl %v: %s", args, errOut.String())
	return out.String()
}

func init() {
	// Tests print opi's logs on failure; keep them readable.
	_ = os.Setenv("NO_COLOR", "1")
}

// runOpiOnce runs opi to completion (for start-up failures) and returns its session.
func runOpiOnce(args ...string) *gexec.Session {
	session, err := gexec.Start(exec.Command(opiBin, args...), GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	return session.Wait(60 * time.Second)
}
