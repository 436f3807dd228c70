package integration_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/loggregator"
	"github.com/opi-bridge/opi/podlogs"
	"github.com/opi-bridge/opi/testsupport/ccstandin"
	"github.com/opi-bridge/opi/testsupport/fixture"
	"github.com/opi-bridge/opi/testsupport/kubeletlogs"
	"github.com/opi-bridge/opi/testsupport/kubeletstats"
	standin "github.com/opi-bridge/opi/testsupport/loggregator"
)

// envelope is a log envelope as the agent specs compare it.
type envelope struct {
	SourceID, InstanceID string
	Time                 time.Time
	Type                 loggregator_v2.Log_Type
	Payload              string
	Tags                 map[string]string
}

// logsOf are the log envelopes among envs whose process_instance_id is uid, in order of arrival.
func logsOf(envs []*loggregator_v2.Envelope, uid string) []envelope {
	out := []envelope{}
	for _, e := range envs {
		if e.GetLog() == nil || e.Tags["process_instance_id"] != uid {
			continue
		}
		out = append(out, envelope{
			SourceID: e.SourceId, InstanceID: e.InstanceId, Time: time.Unix(0, e.Timestamp).UTC(),
			Type: e.GetLog().GetType(), Payload: string(e.GetLog().GetPayload()), Tags: e.Tags,
		})
	}
	return out
}

// agentProcess is one `opi agent` run as a plain process on the suite's node.
type agentProcess struct {
	args    []string
	session *gexec.Session
}

func (p *agentProcess) start() {
	var err error
	p.session, err = gexec.Start(exec.Command(opiBin, p.args...), GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	Eventually(p.session.Out, 60*time.Second).Should(gbytes.Say(`agent\.started`), "opi agent did not start")
}

// stop sends SIGTERM, as the kubelet stops a DaemonSet's pod, and expects a clean exit.
func (p *agentProcess) stop() {
	if p.session == nil {
		return
	}
	p.session.Terminate().Wait(20 * time.Second)
	Expect(p.session.ExitCode()).To(Equal(0), "opi agent did not stop cleanly on SIGTERM")
	p.session = nil
}

// suiteNode is the name of the suite's one kwok node: every pod is on it.
func suiteNode() string {
	GinkgoHelper()
	nodes, err := kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(nodes.Items).To(HaveLen(1), "the suite runs one kwok node: every pod is on the agent's")
	return nodes.Items[0].Name
}

// agentArgs are the flags of the agent of node for the apps of ns, sending to ingress, and
// reading the kubelet stand-in's stats when kubelet is set.
func agentArgs(node, ns, podLogs, stateDir string, ingress *standin.Server, kubelet *kubeletstats.Server) []string {
	GinkgoHelper()
	files := ingress.ClientFiles()
	args := []string{"agent", "--node", node, "--kubeconfig", cluster.Kubeconfig(), "--namespace", ns, "--backend", testBackend,
		"--pod-logs", podLogs, "--state-dir", stateDir, "--ops-listen", freeAddr(),
		"--loggregator-addr", ingress.Addr(), "--loggregator-ca", files.CA, "--loggregator-cert", files.Cert, "--loggregator-key", files.Key}
	if kubelet != nil {
		token := filepath.Join(GinkgoT().TempDir(), "token")
		Expect(os.WriteFile(token, []byte("agent-token\n"), 0o600)).To(Succeed())
		args = append(args, "--kubelet-url", kubelet.URL(), "--kubelet-ca", kubelet.CAFile(), "--kubelet-token-file", token)
	}
	return args
}

var _ = Describe("The node agent, opi agent as a process, with the kubelet's files of real pods", func() {
	var (
		ns       string
		o        *opiServer
		cc       *ccstandin.Server
		ingress  *standin.Server
		kubelet  *kubeletstats.Server
		node     string
		podLogs  string
		stateDir string
		t0       time.Time
	)

	BeforeEach(func() {
		cc = startCC()
		ns = newNamespace()
		o = startOpi(ns, cc.OpiArgs()...)

		var err error
		ingress, err = standin.Start(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(ingress.Stop)

		node = suiteNode()
		podLogs, stateDir = GinkgoT().TempDir(), GinkgoT().TempDir()
		// The lines' own times: distinct per spec, so that an envelope of another spec never
		// matches.
		t0 = time.Now().UTC().Truncate(time.Second)
	})

	// newAgent is the agent of the node, not started; with the kubelet stand-in when it runs.
	newAgent := func() *agentProcess {
		p := &agentProcess{args: agentArgs(node, ns, podLogs, stateDir, ingress, kubelet)}
		DeferCleanup(p.stop)
		return p
	}

	// runningPods desires a and returns its pods in the order of their indices, once every
	// instance runs on the agent's node; it checks /instances shows exactly those indices.
	runningPods := func(a *app) []corev1.Pod {
		desire(o, a)
		Eventually(allRunning(o, a)).Should(Equal(running(a.instances)))
		var out []corev1.Pod
		for _, name := range livePodNames(ns, a) {
			pod, err := kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(pod.Spec.NodeName).To(Equal(node))
			out = append(out, *pod)
		}
		Expect(out).To(HaveLen(a.instances))
		var indices []int32
		for _, in := range instances(o, a).Instances {
			indices = append(indices, in.Index)
		}
		sort.Slice(indices, func(i, j int) bool { return indices[i] < indices[j] })
		for i := range out {
			Expect(indices[i]).To(BeEquivalentTo(i), "opi's /instances: %v", indices)
		}
		return out
	}

	// oneRunning desires an app of one instance and returns it with its pod, once it runs.
	oneRunning := func() (*app, *corev1.Pod) {
		a := newApp()
		a.instances = 1
		return a, &runningPods(a)[0]
	}

	logsOfPod := func(pod *corev1.Pod) func() []envelope {
		return func() []envelope { return logsOf(ingress.Envelopes(), string(pod.UID)) }
	}

	// payloadsOf reads the payloads of pod's lines the stand-in received, in order.
	payloadsOf := func(pod *corev1.Pod) func() []string {
		return func() []string {
			out := []string{}
			for _, e := range logsOfPod(pod)() {
				out = append(out, e.Payload)
			}
			return out
		}
	}

	containerOf := func(pod *corev1.Pod) *kubeletlogs.Container {
		c, err := kubeletlogs.New(podLogs, pod.Namespace, pod.Name, string(pod.UID), names.ContainerName)
		Expect(err).NotTo(HaveOccurred())
		return c
	}

	// appTags are the tags CF puts on a's lines (fixture.DesireLRP's names) from pod.
	appTags := func(a *app, pod *corev1.Pod) map[string]string {
		return map[string]string{
			"source_type": "APP/PROC/WEB", "app_id": "app-" + a.guid, "app_name": "Dora The App",
			"space_id": "space-1", "space_name": "dev", "organization_id": "org-1", "organization_name": "acme",
			"process_id": a.guid, "process_type": "web", "process_instance_id": string(pod.UID),
		}
	}

	// acknowledged is where the agent's checkpoint of c stands: the file and the offset.
	acknowledged := func(c *kubeletlogs.Container) func() string {
		key, err := podlogs.ContainerKey(podLogs, c.Dir())
		Expect(err).NotTo(HaveOccurred())
		return func() string {
			cp, err := podlogs.OpenCheckpoints(stateDir)
			if err != nil {
				return err.Error()
			}
			p := cp.Get(key)
			return fmt.Sprintf("%s:%d", p.Name, p.Offset)
		}
	}
	endOf := func(c *kubeletlogs.Container) string {
		info, err := os.Stat(c.Path())
		Expect(err).NotTo(HaveOccurred())
		return fmt.Sprintf("%s:%d", filepath.Base(c.Path()), info.Size())
	}

	It("sends each instance's stdout and stderr lines with its index in /instances: partial lines joined, through a rotation and a container restart", func() {
		a := newApp()
		pods := runningPods(a)
		newAgent().start()

		want := map[string][]envelope{}
		for i := range pods {
			pod := &pods[i]
			c := containerOf(pod)
			at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
			Expect(c.Line(at(1), kubeletlogs.Stdout, fmt.Sprintf("instance %d listening on 8080", i))).To(Succeed())
			Expect(c.Partial(at(2), kubeletlogs.Stderr, "warning: ", "written in ", "three parts")).To(Succeed())
			Expect(c.Raw(kubeletlogs.Format(at(3), kubeletlogs.Stdout, true, "cut by "))).To(Succeed())
			_, err := c.Rotate(at(3))
			Expect(err).NotTo(HaveOccurred())
			Expect(c.Raw(kubeletlogs.Format(at(4), kubeletlogs.Stdout, false, "the rotation"))).To(Succeed())
			Expect(c.Line(at(5), kubeletlogs.Stderr, "the last line before the crash")).To(Succeed())
			_, err = c.Restart()
			Expect(err).NotTo(HaveOccurred())
			Expect(c.Line(at(6), kubeletlogs.Stdout, "started again")).To(Succeed())

			index, tags := fmt.Sprint(i), appTags(a, pod)
			want[pod.Name] = []envelope{
				{SourceID: "app-" + a.guid, InstanceID: index, Time: at(1), Type: loggregator_v2.Log_OUT, Payload: fmt.Sprintf("instance %d listening on 8080", i), Tags: tags},
				{SourceID: "app-" + a.guid, InstanceID: index, Time: at(2), Type: loggregator_v2.Log_ERR, Payload: "warning: written in three parts", Tags: tags},
				{SourceID: "app-" + a.guid, InstanceID: index, Time: at(3), Type: loggregator_v2.Log_OUT, Payload: "cut by the rotation", Tags: tags},
				{SourceID: "app-" + a.guid, InstanceID: index, Time: at(5), Type: loggregator_v2.Log_ERR, Payload: "the last line before the crash", Tags: tags},
				{SourceID: "app-" + a.guid, InstanceID: index, Time: at(6), Type: loggregator_v2.Log_OUT, Payload: "started again", Tags: tags},
			}
		}
		for i := range pods {
			Eventually(logsOfPod(&pods[i])).Should(Equal(want[pods[i].Name]), "instance %d (%s)", i, pods[i].Name)
		}

		By("opi's stop/1 (cf restart-app-instance 1) ending the pod whose lines said instance 1")
		status, body := o.call(http.MethodPut, a.path()+"/stop/1", "")
		Expect(status).To(Equal(http.StatusOK), body)
		uids := func() []string {
			out := []string{}
			list, err := kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector(a)})
			Expect(err).NotTo(HaveOccurred())
			for _, p := range list.Items {
				if p.DeletionTimestamp == nil {
					out = append(out, string(p.UID))
				}
			}
			return out
		}
		Eventually(uids).ShouldNot(ContainElement(string(pods[1].UID)))
		Expect(uids()).To(ContainElement(string(pods[0].UID)))
	})

	It("sends a task's lines as APP/TASK/<name>", func() {
		guid := fixture.NewGUID()
		body := fixture.Task(cc.URL+"/internal/v4/tasks/"+guid+"/completed", "sleep 3600")
		status, resp := o.call(http.MethodPost, "/tasks/"+guid, body.JSON())
		Expect(status).To(Equal(http.StatusAccepted), resp)
		var pod corev1.Pod
		Eventually(func(g Gomega) {
			list, err := kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + names.TaskJobName(guid)})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(list.Items).To(HaveLen(1))
			g.Expect(list.Items[0].Status.Phase).To(Equal(corev1.PodRunning))
			pod = list.Items[0]
		}).Should(Succeed())
		Expect(pod.Spec.NodeName).To(Equal(node))
		newAgent().start()

		c := containerOf(&pod)
		Expect(c.Line(t0, kubeletlogs.Stdout, "migrating 3 tables")).To(Succeed())
		Expect(c.Line(t0.Add(time.Millisecond), kubeletlogs.Stderr, "table 2 is empty")).To(Succeed())
		tags := map[string]string{
			"source_type": "APP/TASK/migrate", "app_id": fixture.AppGUID, "app_name": "hello",
			"space_id": fixture.SpaceGUID, "space_name": "dev", "organization_id": fixture.OrgGUID, "organization_name": "demo",
			"process_instance_id": string(pod.UID),
		}
		Eventually(logsOfPod(&pod)).Should(Equal([]envelope{
			{SourceID: fixture.AppGUID, InstanceID: "0", Time: t0, Type: loggregator_v2.Log_OUT, Payload: "migrating 3 tables", Tags: tags},
			{SourceID: fixture.AppGUID, InstanceID: "0", Time: t0.Add(time.Millisecond), Type: loggregator_v2.Log_ERR, Payload: "table 2 is empty", Tags: tags},
		}))
	})

	It("resumes after its restart (SIGTERM) from the acknowledged position: every line once", func() {
		_, pod := oneRunning()
		agent := newAgent()
		agent.start()

		c := containerOf(pod)
		var want []string
		line := func(text string) {
			Expect(c.Line(t0.Add(time.Duration(len(want))*time.Millisecond), kubeletlogs.Stdout, text)).To(Succeed())
			want = append(want, text)
		}
		payloads := payloadsOf(pod)
		for i := range 3 {
			line(fmt.Sprintf("before the restart %d", i))
		}
		Eventually(payloads).Should(Equal(want))
		// Acknowledged: else the batch is rightly sent again after the restart (docs/logging.md).
		Eventually(acknowledged(c)).Should(Equal(endOf(c)))
		agent.stop()

		for i := range 3 {
			line(fmt.Sprintf("while the agent was down %d", i))
		}
		agent.start()
		for i := range 2 {
			line(fmt.Sprintf("after the restart %d", i))
		}
		// In order: a line sent again would come before the new ones and never match.
		Eventually(payloads).Should(Equal(want))
		Eventually(acknowledged(c)).Should(Equal(endOf(c)))
	})

	It("loses no line when SIGTERM comes while it sends, sending again at most the one unacknowledged batch", func() {
		_, pod := oneRunning()
		agent := newAgent()
		agent.start()

		c := containerOf(pod)
		var want []string
		for i := range 300 {
			want = append(want, fmt.Sprintf("line %03d", i))
			Expect(c.Line(t0.Add(time.Duration(i)*time.Microsecond), kubeletlogs.Stdout, want[i])).To(Succeed())
		}
		payloads := payloadsOf(pod)
		Eventually(payloads).ShouldNot(BeEmpty())
		agent.stop() // whatever is in flight now
		before := len(payloads())

		for i := 300; i < 310; i++ {
			want = append(want, fmt.Sprintf("line %03d", i))
			Expect(c.Line(t0.Add(time.Duration(i)*time.Microsecond), kubeletlogs.Stdout, want[i])).To(Succeed())
		}
		agent.start()
		Eventually(acknowledged(c)).Should(Equal(endOf(c)))
		got := payloads()
		// Each line arrives; what came twice is one run of lines sent before the restart, at
		// most one batch (the Sender's largest): the batch in flight at SIGTERM.
		var unique []string
		seenLine := map[string]bool{}
		for _, p := range got {
			if !seenLine[p] {
				seenLine[p] = true
				unique = append(unique, p)
			}
		}
		Expect(unique).To(Equal(want))
		Expect(len(got) - len(want)).To(BeNumerically("<=", loggregator.DefaultMaxBatchEnvelopes))
		Expect(got[:before]).To(Equal(want[:before]), "in order up to the restart")
		dups := got[before:]
		Expect(dups[len(dups)-(len(want)-before):]).To(Equal(want[before:]), "then the rest in order, after the lines sent again")
		Expect(dups[:len(dups)-(len(want)-before)]).To(Equal(want[before-(len(got)-len(want)):before]), "the lines sent again are the last ones before the restart")
	})

	It("sends every line written while Loggregator was down once it is back", func() {
		a, pod := oneRunning()
		agent := newAgent()
		agent.start()

		c := containerOf(pod)
		Expect(c.Line(t0, kubeletlogs.Stdout, "before the outage")).To(Succeed())
		want := []envelope{{SourceID: "app-" + a.guid, InstanceID: "0", Time: t0, Type: loggregator_v2.Log_OUT, Payload: "before the outage", Tags: appTags(a, pod)}}
		Eventually(logsOfPod(pod)).Should(Equal(want))
		Eventually(acknowledged(c)).Should(Equal(endOf(c)))

		ingress.Stop()
		for i := 1; i <= 20; i++ {
			at := t0.Add(time.Duration(i) * time.Millisecond)
			Expect(c.Line(at, kubeletlogs.Stderr, fmt.Sprintf("during the outage %d", i))).To(Succeed())
			want = append(want, envelope{SourceID: "app-" + a.guid, InstanceID: "0", Time: at, Type: loggregator_v2.Log_ERR, Payload: fmt.Sprintf("during the outage %d", i), Tags: appTags(a, pod)})
		}
		Eventually(agent.session.Out).Should(gbytes.Say(`send-failed-retrying`), "the agent tried to send during the outage")
		Expect(ingress.Restart()).To(Succeed())

		Eventually(logsOfPod(pod)).Should(Equal(want))
		Eventually(agent.session.Out).Should(gbytes.Say(`send-succeeded-again`))
	})

	It("sends the kubelet's stats of each instance as the container metrics gauges", func() {
		dir := GinkgoT().TempDir()
		var err error
		kubelet, err = kubeletstats.Start(dir, "agent-token")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { kubelet.Close(); kubelet = nil })
		a, pod := oneRunning()

		const mi = 1024 * 1024
		kubelet.SetSummary(statsv1alpha1.Summary{
			Node: statsv1alpha1.NodeStats{NodeName: node},
			Pods: []statsv1alpha1.PodStats{{
				PodRef: statsv1alpha1.PodReference{Name: pod.Name, Namespace: ns, UID: string(pod.UID)},
				Containers: []statsv1alpha1.ContainerStats{{
					Name:   names.ContainerName,
					CPU:    &statsv1alpha1.CPUStats{UsageNanoCores: ptr.To[uint64](125_000_000)},
					Memory: &statsv1alpha1.MemoryStats{WorkingSetBytes: ptr.To[uint64](40 * mi)},
					Rootfs: &statsv1alpha1.FsStats{UsedBytes: ptr.To[uint64](20 * mi)},
					Logs:   &statsv1alpha1.FsStats{UsedBytes: ptr.To[uint64](2 * mi)},
				}},
			}},
		})
		newAgent().start()

		tags := appTags(a, pod)
		delete(tags, "source_type")
		gauges := func() []standin.Gauge { return standin.GaugesIn(ingress.Envelopes()) }
		// Under the process guid (CC's guid), which CC's OPI mode reads; the lines stay under
		// the app guid.
		want := standin.Gauge{
			SourceID: a.guid, InstanceID: "0", Tags: tags,
			// fixture.DesireLRP's memory_mb 64 and disk_mb 256 are the container's limits.
			Values: map[string]float64{"cpu": 12.5, "memory": 40 * mi, "disk": 22 * mi, "memory_quota": 64 * mi, "disk_quota": 256 * mi},
			Units:  map[string]string{"cpu": "percentage", "memory": "bytes", "disk": "bytes", "memory_quota": "bytes", "disk_quota": "bytes"},
		}
		// Every 15 s, as Diego's rep.
		Eventually(gauges, 60*time.Second).Should(ContainElement(want))
		Expect(gauges()).To(HaveEach(want))
		// What CC's OPI mode reads of the process: one row, instance 0, only its gauges.
		rows := ingress.GaugesBySource()
		Expect(rows).To(HaveKey(a.guid))
		Expect(rows[a.guid]).To(HaveLen(1))
		Expect(standin.GaugesIn(rows[a.guid]["0"])).To(HaveEach(want))
		served, refused := kubelet.Requests()
		Expect(served).To(BeNumerically(">", 0))
		Expect(refused).To(BeZero())
	})
})
