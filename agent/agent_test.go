package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/agent"
	"github.com/opi-bridge/opi/k8s/instances"
	"github.com/opi-bridge/opi/k8s/instances/clientset"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/loggregator"
	"github.com/opi-bridge/opi/testsupport/kubeletstats"
	standin "github.com/opi-bridge/opi/testsupport/loggregator"
)

const (
	ns      = "cf-workloads"
	node    = "node-1"
	appGUID = "9d3e4d2c-6a45-4e1b-8f0e-2b8f1c1d2e3f"
	lrpGUID = "b0c4a1e2-77aa-4c1e-9f00-1234567890ab"
	version = "v1"
	// linesNotice is Diego's notice for an instance over its line bound (0.001 lines/s here).
	linesNotice = "app instance exceeded log rate limit (0.001 log-lines/sec) set by platform operator"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// seen is an envelope as the specs compare it.
type seen struct {
	SourceID, InstanceID string
	Time                 time.Time
	Type                 loggregator_v2.Log_Type
	Payload              string
	Tags                 map[string]string
}

func seenOf(envs []*loggregator_v2.Envelope) []seen {
	out := make([]seen, 0, len(envs))
	for _, e := range envs {
		out = append(out, seen{
			SourceID: e.SourceId, InstanceID: e.InstanceId, Time: time.Unix(0, e.Timestamp).UTC(),
			Type: e.GetLog().GetType(), Payload: string(e.GetLog().GetPayload()), Tags: e.Tags,
		})
	}
	return out
}

func payloads(envs []*loggregator_v2.Envelope) []string {
	var out []string
	for _, e := range envs {
		out = append(out, string(e.GetLog().GetPayload()))
	}
	return out
}

// process is an LRP of the specs' app: CC's guid and version, and the process type.
type process struct{ guid, version, processType string }

// lrp is the web process most specs run (its guid is not the app guid: a web process after a
// rolling deploy).
var lrp = process{guid: lrpGUID, version: version, processType: "web"}

func (p process) labels() map[string]string {
	return map[string]string{
		names.LabelGUID: p.guid, names.LabelVersion: p.version, names.LabelAppGUID: appGUID,
		names.LabelProcessType: p.processType, names.LabelSourceType: names.SourceTypeApp,
	}
}

// deployment is the process's Deployment, named name.
func (p process) deployment(name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: p.labels(),
			Annotations: map[string]string{
				names.AnnotationProcessType: p.processType, names.AnnotationAppName: "dora",
				names.AnnotationSpaceGUID: "space-guid", names.AnnotationSpaceName: "dev",
				names.AnnotationOrgGUID: "org-guid", names.AnnotationOrgName: "acme",
			},
		},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas)},
	}
}

// pod is a running, ready instance of the process.
func (p process) pod(name, uid, onNode string, created time.Time) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID(uid),
			CreationTimestamp: metav1.NewTime(created),
			Labels:            p.labels(),
		},
		Spec: corev1.PodSpec{NodeName: onNode, Containers: []corev1.Container{{Name: names.ContainerName}}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
}

// tags are the tags of the process's instance uid on its lines (and, but for source_type, on
// its gauges).
func (p process) tags(uid string) map[string]string {
	return map[string]string{
		"source_type": loggregator.ProcessSourceType(p.processType),
		"app_id":      appGUID, "app_name": "dora",
		"space_id": "space-guid", "space_name": "dev",
		"organization_id": "org-guid", "organization_name": "acme",
		"process_id": p.guid, "process_type": p.processType, "process_instance_id": uid,
	}
}

func deployment(replicas int32) *appsv1.Deployment {
	return lrp.deployment("dora-dev-b0c4a1e2", replicas)
}

func appPod(name, uid, onNode string, created time.Time) *corev1.Pod {
	return lrp.pod(name, uid, onNode, created)
}

func taskJob() *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name: "task-t1", Namespace: ns, UID: "job-uid",
			Labels: map[string]string{names.LabelAppGUID: appGUID, names.LabelSourceType: names.SourceTypeTask, names.LabelTaskGUID: "t1"},
			Annotations: map[string]string{
				names.AnnotationTaskGUID: "t1", names.AnnotationTaskName: "migrate",
				names.AnnotationAppName: "dora", names.AnnotationSpaceGUID: "space-guid", names.AnnotationSpaceName: "dev",
				names.AnnotationOrgGUID: "org-guid", names.AnnotationOrgName: "acme",
			},
		},
	}
}

func taskPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "task-t1-x7k2p", Namespace: ns, UID: "task-pod-uid",
			Labels: map[string]string{
				names.LabelAppGUID: appGUID, names.LabelSourceType: names.SourceTypeTask, names.LabelTaskGUID: "t1",
				batchv1.JobNameLabel: "task-t1",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "task-t1", UID: "job-uid", Controller: ptr.To(true)}},
		},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: names.ContainerName}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// writeLines appends CRI lines to the kubelet's file of pod's app container (restart count 0).
func writeLines(root string, pod *corev1.Pod, lines ...string) {
	writeContainerLines(root, pod, names.ContainerName, lines...)
}

// writeContainerLines appends CRI lines to the kubelet's file of one of pod's containers.
func writeContainerLines(root string, pod *corev1.Pod, container string, lines ...string) {
	dir := filepath.Join(root, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), container)
	Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
	f, err := os.OpenFile(filepath.Join(dir, "0.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	for _, l := range lines {
		_, err := f.WriteString(l + "\n")
		Expect(err).NotTo(HaveOccurred())
	}
}

func cri(t time.Time, stream, tag, content string) string {
	return t.Format(time.RFC3339Nano) + " " + stream + " " + tag + " " + content
}

// webTags are the tags every instance of lrp has on its lines (withInstance adds the instance's).
var webTags = func() map[string]string {
	tags := lrp.tags("")
	delete(tags, "process_instance_id")
	return tags
}()

// taskTags are the tags of taskPod's lines.
var taskTags = map[string]string{
	"source_type": "APP/TASK/migrate", "app_id": appGUID, "app_name": "dora",
	"space_id": "space-guid", "space_name": "dev", "organization_id": "org-guid", "organization_name": "acme",
	"process_instance_id": "task-pod-uid",
}

func withInstance(tags map[string]string, uid string) map[string]string {
	m := map[string]string{"process_instance_id": uid}
	for k, v := range tags {
		m[k] = v
	}
	return m
}

// startIngress starts a loggregator stand-in until the spec ends and returns it with an agent
// config sending to it (temp folders for the pod logs and the state).
func startIngress() (*standin.Server, agent.Config) {
	ingress, err := standin.Start(GinkgoT().TempDir())
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(ingress.Stop)
	files := ingress.ClientFiles()
	return ingress, agent.Config{
		Node: node, Namespace: ns, PodLogs: GinkgoT().TempDir(), StateDir: GinkgoT().TempDir(),
		Loggregator: loggregator.SenderConfig{
			Addr: ingress.Addr(), CAFile: files.CA, CertFile: files.Cert, KeyFile: files.Key,
			MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
			DrainTimeout: 100 * time.Millisecond, // a stop while the stand-in is down waits no longer
		},
		PollInterval: 5 * time.Millisecond,
	}
}

// startKubelet starts a kubelet stand-in and points cfg's agent at its stats summary, read
// every 5 ms with a service account token it accepts.
func startKubelet(cfg *agent.Config) *kubeletstats.Server {
	dir := GinkgoT().TempDir()
	token := filepath.Join(dir, "token")
	Expect(os.WriteFile(token, []byte("sa-token\n"), 0o600)).To(Succeed())
	kubelet, err := kubeletstats.Start(dir, "sa-token")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(kubelet.Close)
	cfg.Kubelet = agent.Kubelet{URL: kubelet.URL(), CAFile: kubelet.CAFile(), TokenFile: token, Interval: 5 * time.Millisecond}
	return kubelet
}

// sources are the apps namespace's objects through client.
func sources(client kubernetes.Interface) instances.Sources { return clientset.Sources(client, ns) }

// runAgent runs an agent until stop is called (or the spec ends).
func runAgent(cfg agent.Config, client kubernetes.Interface) (a *agent.Agent, stop func()) {
	a, err := agent.New(cfg, sources(client), lagertest.NewTestLogger("agent"))
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		Eventually(done, 10*time.Second).Should(Receive(BeNil()))
	}
	DeferCleanup(stop)
	return a, stop
}

var _ = Describe("Agent", func() {
	var (
		ingress  *standin.Server
		cfg      agent.Config
		client   *fake.Clientset
		podLogs  string
		stateDir string
	)

	BeforeEach(func() {
		ingress, cfg = startIngress()
		podLogs, stateDir = cfg.PodLogs, cfg.StateDir
	})

	start := func() (a *agent.Agent, stop func()) { return runAgent(cfg, client) }

	It("sends an app pod's and a task pod's lines with Diego's identity, and nothing of another node's pod", func() {
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		other := appPod("dora-dev-b0c4a1e2-5d8f9-zzzzz", "other-uid", "node-2", t0.Add(time.Second))
		task := taskPod()
		client = fake.NewClientset(deployment(2), web, other, taskJob(), task)
		writeLines(podLogs, web,
			cri(t0.Add(1), "stdout", "F", "listening on 8080"),
			cri(t0.Add(2), "stderr", "P", "warn: "),
			cri(t0.Add(3), "stderr", "F", "slow start"),
		)
		writeLines(podLogs, other, cri(t0.Add(4), "stdout", "F", "not this node"))
		writeLines(podLogs, task, cri(t0.Add(5), "stdout", "F", "migrated 3 tables"))
		start()

		wantWeb := []seen{
			{SourceID: appGUID, InstanceID: "0", Time: t0.Add(1), Type: loggregator_v2.Log_OUT, Payload: "listening on 8080", Tags: withInstance(webTags, "web-uid")},
			{SourceID: appGUID, InstanceID: "0", Time: t0.Add(2), Type: loggregator_v2.Log_ERR, Payload: "warn: slow start", Tags: withInstance(webTags, "web-uid")},
		}
		wantTask := seen{SourceID: appGUID, InstanceID: "0", Time: t0.Add(5), Type: loggregator_v2.Log_OUT, Payload: "migrated 3 tables", Tags: taskTags}
		Eventually(func() []seen { return seenOf(ingress.Envelopes()) }, 10*time.Second).Should(ConsistOf(wantWeb[0], wantWeb[1], wantTask))
		// The web pod's lines in their order.
		var webSeen []seen
		for _, s := range seenOf(ingress.Envelopes()) {
			if s.Tags["process_instance_id"] == "web-uid" {
				webSeen = append(webSeen, s)
			}
		}
		Expect(webSeen).To(Equal(wantWeb))
	})

	It("ships nothing of the SSH proxy's relay container in an instance's pod, only the app's lines", func() {
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		web.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: names.RelayContainerName}}}
		client = fake.NewClientset(deployment(1), web)
		writeContainerLines(podLogs, web, names.RelayContainerName, cri(t0.Add(1), "stderr", "F", "relay: dialled db.internal:5432"))
		writeLines(podLogs, web, cri(t0.Add(2), "stdout", "F", "listening on 8080"))
		_, stop := start()
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(ContainElement("listening on 8080"))
		writeContainerLines(podLogs, web, names.RelayContainerName, cri(t0.Add(3), "stderr", "F", "relay: dialled db.internal:5433"))
		writeLines(podLogs, web, cri(t0.Add(4), "stdout", "F", "served GET /"))
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(ContainElement("served GET /"))
		stop()
		Expect(payloads(ingress.Envelopes())).To(Equal([]string{"listening on 8080", "served GET /"}))
	})

	It("reports the index opi reports: the rank among the LRP's pods, by creation time", func() {
		// Names in the opposite order of creation: the rank is by creation time, not name.
		older := appPod("dora-dev-b0c4a1e2-5d8f9-zzzzz", "older-uid", node, t0)
		newer := appPod("dora-dev-b0c4a1e2-5d8f9-aaaaa", "newer-uid", node, t0.Add(time.Minute))
		client = fake.NewClientset(deployment(2), older, newer)
		writeLines(podLogs, older, cri(t0.Add(1), "stdout", "F", "from the older pod"))
		writeLines(podLogs, newer, cri(t0.Add(2), "stdout", "F", "from the newer pod"))
		start()

		index := func() map[string]string {
			m := map[string]string{}
			for _, s := range seenOf(ingress.Envelopes()) {
				m[s.Payload] = s.InstanceID
			}
			return m
		}
		Eventually(index, 10*time.Second).Should(Equal(map[string]string{"from the older pod": "0", "from the newer pod": "1"}))
	})

	It("resumes from its checkpoints after a restart, sending no acknowledged line twice", func() {
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		client = fake.NewClientset(deployment(1), web)
		writeLines(podLogs, web, cri(t0.Add(1), "stdout", "F", "one"), cri(t0.Add(2), "stdout", "F", "two"))
		a, stop := start()
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal([]string{"one", "two"}))
		// Acknowledged: the stand-in records a batch before its Send returns.
		Eventually(func() uint64 { return a.Stats().Sender.Delivered }, 10*time.Second).Should(Equal(uint64(2)))
		stop()
		Expect(filepath.Join(stateDir, "positions.json")).To(BeAnExistingFile())

		writeLines(podLogs, web, cri(t0.Add(3), "stdout", "F", "three"))
		client = fake.NewClientset(deployment(1), web)
		start()
		// Lines go out in order: a re-sent "one" or "two" would come before "three".
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal([]string{"one", "two", "three"}))
	})

	It("saves a position only once Loggregator acknowledged its line: stopped during an outage and started again, it sends every line exactly once", func() {
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		client = fake.NewClientset(deployment(1), web)
		writeLines(podLogs, web, cri(t0.Add(1), "stdout", "F", "before"))
		a, stop := start()
		// Acknowledged before the outage (else its Send may be retried: a duplicate, rightly).
		Eventually(func() uint64 { return a.Stats().Sender.Delivered }, 10*time.Second).Should(Equal(uint64(1)))

		ingress.Stop()
		want := []string{"before"}
		for i := range 3 {
			want = append(want, fmt.Sprintf("during %d", i))
			writeLines(podLogs, web, cri(t0.Add(time.Duration(10+i)), "stdout", "F", want[len(want)-1]))
		}
		// Read and handed to the Sender, never acknowledged: the checkpoint must stay after "before".
		Eventually(func() uint64 { return a.Stats().LinesRead }, 10*time.Second).Should(Equal(uint64(4)))
		Eventually(func() uint64 { return a.Stats().Sender.FailedSends }, 10*time.Second).Should(BeNumerically(">", 0))
		stop()
		Expect(a.Stats().Sender.Buffered).To(Equal(3))

		Expect(ingress.Restart()).To(Succeed())
		writeLines(podLogs, web, cri(t0.Add(20), "stdout", "F", "after"))
		client = fake.NewClientset(deployment(1), web)
		start()
		// In order, each once: a lost line would be missing before "after", a re-sent one doubled.
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal(append(want, "after")))
	})

	It("checkpoints stdout's lines while a stderr line stays partial: a restart sends none of them again", func() {
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		client = fake.NewClientset(deployment(1), web)
		writeLines(podLogs, web,
			"2026-12-01T12:00:00.000000001Z stderr P never completed ",
			"2026-12-01T12:00:00.000000002Z stdout F one",
			"2026-12-01T12:00:00.000000003Z stdout F two",
		)
		a, stop := start()
		Eventually(func() uint64 { return a.Stats().Sender.Delivered }, 10*time.Second).Should(Equal(uint64(2)))
		stop()

		writeLines(podLogs, web, "2026-12-01T12:00:00.000000004Z stdout F three")
		client = fake.NewClientset(deployment(1), web)
		start()
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal([]string{"one", "two", "three"}))
	})

	It("keeps the positions an agent of the earlier checkpoint format saved (upgraded in place)", func() {
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		client = fake.NewClientset(deployment(1), web)
		one := cri(t0.Add(1), "stdout", "F", "one")
		writeLines(podLogs, web, one, cri(t0.Add(2), "stdout", "F", "two"))
		info, err := os.Stat(filepath.Join(podLogs, ns+"_"+web.Name+"_web-uid", names.ContainerName, "0.log"))
		Expect(err).NotTo(HaveOccurred())
		st := info.Sys().(*syscall.Stat_t)
		// positions.json as agents before per-stream marks wrote it: "one" was acknowledged.
		old := fmt.Sprintf(`{"%s_%s_web-uid/opi":{"dev":%d,"ino":%d,"name":"0.log","offset":%d,"first":%q}}`,
			ns, web.Name, st.Dev, st.Ino, len(one)+1, t0.Add(1).Format(time.RFC3339Nano))
		Expect(os.WriteFile(filepath.Join(stateDir, "positions.json"), []byte(old), 0o600)).To(Succeed())
		a, _ := start()
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal([]string{"two"}))
		Expect(a.Stats().CheckpointsUnreadable).To(BeZero())
	})

	It("reads a deleted pod's files to their end, then stops following it and forgets its checkpoint", func() {
		// One read when the pod appears, none after but the last: "last words" go out only
		// through the read of a deleted pod's files.
		cfg.PollInterval = time.Hour
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		client = fake.NewClientset(deployment(1), web)
		writeLines(podLogs, web, cri(t0.Add(1), "stdout", "F", "one"))
		a, _ := start()
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal([]string{"one"}))
		checkpoints := filepath.Join(stateDir, "positions.json")
		Eventually(func() (string, error) { b, err := os.ReadFile(checkpoints); return string(b), err }, 10*time.Second).
			Should(ContainSubstring(ns + "_" + web.Name + "_web-uid/opi"))

		writeLines(podLogs, web, cri(t0.Add(2), "stdout", "F", "last words"))
		Expect(client.CoreV1().Pods(ns).Delete(context.Background(), web.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(func() int { return a.Stats().Followed }, 10*time.Second).Should(BeZero())
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal([]string{"one", "last words"}))
		Eventually(func() (string, error) { b, err := os.ReadFile(checkpoints); return string(b), err }, 10*time.Second).
			ShouldNot(ContainSubstring("web-uid"))
	})

	It("counts a file that went while it was not running, and reads on at the oldest file there is", func() {
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		client = fake.NewClientset(deployment(1), web)
		writeLines(podLogs, web, cri(t0.Add(1), "stdout", "F", "one"))
		a, stop := start()
		Eventually(func() uint64 { return a.Stats().Sender.Delivered }, 10*time.Second).Should(Equal(uint64(1)))
		stop()
		Expect(a.Stats().LostFiles).To(BeZero())

		// Rotated and deleted (past the kubelet's containerLogMaxFiles) while the agent was down.
		writeLines(podLogs, web, cri(t0.Add(2), "stdout", "F", "lost"))
		dir := filepath.Join(podLogs, ns+"_"+web.Name+"_web-uid", names.ContainerName)
		Expect(os.Remove(filepath.Join(dir, "0.log"))).To(Succeed())
		writeLines(podLogs, web, cri(t0.Add(3), "stdout", "F", "after"))
		client = fake.NewClientset(deployment(1), web)
		a, _ = start()
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal([]string{"one", "after"}))
		Expect(a.Stats().LostFiles).To(Equal(uint64(1)))
	})

	It("forgets, when it starts, the checkpoints of pods that went while it was not running", func() {
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		client = fake.NewClientset(deployment(1), web)
		writeLines(podLogs, web, cri(t0.Add(1), "stdout", "F", "one"))
		a, stop := start()
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal([]string{"one"}))
		Eventually(func() uint64 { return a.Stats().Sender.Delivered }, 10*time.Second).Should(Equal(uint64(1)))
		stop()
		checkpoints := filepath.Join(stateDir, "positions.json")
		Expect(os.ReadFile(checkpoints)).To(ContainSubstring("web-uid"))

		client = fake.NewClientset(deployment(1))
		start()
		Eventually(func() (string, error) { b, err := os.ReadFile(checkpoints); return string(b), err }, 10*time.Second).
			ShouldNot(ContainSubstring("web-uid"))
	})

	It("loses no line through an outage longer than its buffer holds: it stops reading while the buffer is full", func() {
		cfg.Loggregator.MaxBufferedEnvelopes = 5
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		client = fake.NewClientset(deployment(1), web)
		writeLines(podLogs, web, cri(t0.Add(1), "stdout", "F", "before"))
		a, _ := start()
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal([]string{"before"}))
		// Acknowledged before the outage (else its Send is retried: a duplicate, rightly).
		Eventually(func() uint64 { return a.Stats().Sender.Delivered }, 10*time.Second).Should(Equal(uint64(1)))

		ingress.Stop()
		var want []string
		for i := range 20 {
			want = append(want, fmt.Sprintf("during %d", i))
			writeLines(podLogs, web, cri(t0.Add(time.Duration(10+i)), "stdout", "F", want[i]))
		}
		// Five buffered, the follower waiting to hand over the sixth: the rest stays in the file.
		Eventually(func() int { return a.Stats().Sender.Buffered }, 10*time.Second).Should(Equal(5))
		Eventually(func() uint64 { return a.Stats().Sender.Waits }, 10*time.Second).Should(BeNumerically(">", 0))
		Eventually(func() uint64 { return a.Stats().Sender.FailedSends }, 10*time.Second).Should(BeNumerically(">", 0))
		Expect(ingress.Restart()).To(Succeed())

		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal(append([]string{"before"}, want...)))
		st := a.Stats().Sender
		Expect(st.Dropped).To(BeZero())
		Expect(st.PeakBuffered).To(Equal(5))
	})

	It("saves the checkpoints at once after a quiet while, then at most once per interval, and all of them when it stops", func() {
		cfg.CheckpointInterval = time.Hour
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		client = fake.NewClientset(deployment(1), web)
		logFile := filepath.Join(podLogs, ns+"_"+web.Name+"_web-uid", names.ContainerName, "0.log")
		savedOffset := func() string {
			saved, err := os.ReadFile(filepath.Join(stateDir, "positions.json"))
			if err != nil {
				return err.Error()
			}
			return string(saved)
		}
		offset := func() string {
			info, err := os.Stat(logFile)
			Expect(err).NotTo(HaveOccurred())
			return fmt.Sprintf(`"offset":%d`, info.Size())
		}
		writeLines(podLogs, web, cri(t0.Add(1), "stdout", "F", "one"))
		a, stop := start()
		Eventually(func() uint64 { return a.Stats().Sender.Delivered }, 10*time.Second).Should(Equal(uint64(1)))
		first := offset()
		Eventually(savedOffset, 10*time.Second).Should(ContainSubstring(first))

		writeLines(podLogs, web, cri(t0.Add(2), "stdout", "F", "two"))
		Eventually(func() uint64 { return a.Stats().Sender.Delivered }, 10*time.Second).Should(Equal(uint64(2)))
		Consistently(savedOffset, time.Second).Should(ContainSubstring(first), "within the interval")
		stop()
		Expect(savedOffset()).To(ContainSubstring(offset()))
	})

	It("records the position past lines the rate bound dropped at the end of a file: a restart does not read them again", func() {
		cfg.LinesPerSecond, cfg.LineBurst = 0.001, 2
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		client = fake.NewClientset(deployment(1), web)
		for i := range 5 {
			writeLines(podLogs, web, cri(t0.Add(time.Duration(i)), "stdout", "F", fmt.Sprintf("line %d", i)))
		}
		a, stop := start()
		Eventually(func() uint64 { return a.Stats().RateDropped }, 10*time.Second).Should(Equal(uint64(3)))
		Eventually(func() uint64 { return a.Stats().Sender.Delivered }, 10*time.Second).Should(Equal(uint64(3))) // and the notice
		stop()
		info, err := os.Stat(filepath.Join(podLogs, ns+"_"+web.Name+"_web-uid", names.ContainerName, "0.log"))
		Expect(err).NotTo(HaveOccurred())
		saved, err := os.ReadFile(filepath.Join(stateDir, "positions.json"))
		Expect(err).NotTo(HaveOccurred())
		Expect(string(saved)).To(ContainSubstring(fmt.Sprintf(`"offset":%d`, info.Size())))

		// A new agent's bucket is full again: lines 2 to 4 read again would go out before line 5.
		writeLines(podLogs, web, cri(t0.Add(5), "stdout", "F", "line 5"))
		client = fake.NewClientset(deployment(1), web)
		start()
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal([]string{"line 0", "line 1", linesNotice, "line 5"}))
	})

	It("bounds each instance's lines, with one notice in its own stream as Diego's", func() {
		cfg.LinesPerSecond, cfg.LineBurst = 0.001, 2
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		client = fake.NewClientset(deployment(1), web)
		var lines []string
		for i := range 5 {
			lines = append(lines, cri(t0.Add(time.Duration(i)), "stdout", "F", fmt.Sprintf("line %d", i)))
		}
		writeLines(podLogs, web, lines...)
		a, _ := start()
		Eventually(func() uint64 { return a.Stats().RateDropped }, 10*time.Second).Should(Equal(uint64(3)))
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal([]string{"line 0", "line 1", linesNotice}))
		notice, first := ingress.Envelopes()[2], ingress.Envelopes()[0]
		Expect(notice.GetLog().GetType()).To(Equal(loggregator_v2.Log_OUT))
		Expect(notice.SourceId).To(Equal(first.SourceId))
		Expect(notice.InstanceId).To(Equal(first.InstanceId))
		Expect(notice.Tags).To(Equal(first.Tags))
	})

	It("bounds each instance's bytes of log text, with Diego's notice naming the bound", func() {
		cfg.BytesPerSecond, cfg.ByteBurst = 1, 20
		web := appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
		client = fake.NewClientset(deployment(1), web)
		writeLines(podLogs, web,
			cri(t0, "stdout", "F", "ten bytes!"), cri(t0.Add(1), "stdout", "F", "ten bytes!"),
			cri(t0.Add(2), "stdout", "F", "one more"))
		a, _ := start()
		Eventually(func() uint64 { return a.Stats().RateDropped }, 10*time.Second).Should(Equal(uint64(1)))
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal([]string{
			"ten bytes!", "ten bytes!", "app instance exceeded log rate limit (1 bytes/sec)",
		}))
	})

	It("checks the bound before it builds anything for a line: a dropped line allocates nothing", func() {
		// One byte a second: of the 1,000 lines at most one a second is sent and one noticed,
		// which averages below one allocation a line unless the runs take minutes.
		cfg.BytesPerSecond, cfg.ByteBurst = 1, 1
		a, err := agent.New(cfg, sources(fake.NewClientset()), lagertest.NewTestLogger("agent"))
		Expect(err).NotTo(HaveOccurred())
		Expect(agent.DroppedLineAllocs(a, 1000)).To(BeZero())
		Expect(a.Stats().RateDropped).To(BeNumerically(">=", 1000))
	})

	It("refuses a config it cannot work with, naming what is wrong", func() {
		client = fake.NewClientset()
		_, err := agent.New(agent.Config{PodLogs: "/var/log/pods", StateDir: "/var/log/pods/opi", Workload: "pods"}, sources(client), lagertest.NewTestLogger("agent"))
		Expect(err).To(MatchError(And(
			ContainSubstring("node name is required"),
			ContainSubstring("apps namespace is required"),
			ContainSubstring(`workload "pods"`),
			ContainSubstring("must not be in the pod log folder"),
		)))
	})
})

var _ = Describe("Agent's change notification", func() {
	var (
		ingress *standin.Server
		cfg     agent.Config
		web     *corev1.Pod
	)

	BeforeEach(func() {
		ingress, cfg = startIngress()
		web = appPod("dora-dev-b0c4a1e2-5d8f9-abcde", "web-uid", node, t0)
	})

	It("reads a folder when it changes, without waiting for a poll", func() {
		cfg.PollInterval = time.Hour // no poll within the spec: only notification reads
		writeLines(cfg.PodLogs, web, cri(t0.Add(1), "stdout", "F", "first"))
		runAgent(cfg, fake.NewClientset(deployment(1), web))
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal([]string{"first"}))

		writeLines(cfg.PodLogs, web, cri(t0.Add(2), "stdout", "F", "second"), cri(t0.Add(3), "stderr", "F", "third"))
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal([]string{"first", "second", "third"}))
	})

	It("polls where notification is off, and a folder that did not exist when its pod came", func() {
		cfg.PollOnly = true
		runAgent(cfg, fake.NewClientset(deployment(1), web))
		writeLines(cfg.PodLogs, web, cri(t0.Add(1), "stdout", "F", "polled"))
		Eventually(func() []string { return payloads(ingress.Envelopes()) }, 10*time.Second).Should(Equal([]string{"polled"}))
	})
})
