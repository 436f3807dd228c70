package localkube_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/opi-bridge/opi/localkube"
)

var _ = Describe("Cluster", func() {
	var (
		client kubernetes.Interface
		ns     string
	)

	BeforeEach(func(ctx SpecContext) {
		client = cluster.Clientset()
		created, err := cluster.CreateNamespace(ctx, &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "localkube-test-"},
		})
		Expect(err).NotTo(HaveOccurred())
		ns = created.Name
	})

	getPod := func(ctx SpecContext, name string) func() (*corev1.Pod, error) {
		return func() (*corev1.Pod, error) {
			c, cancel := testContext(ctx)
			defer cancel()
			return client.CoreV1().Pods(ns).Get(c, name, metav1.GetOptions{})
		}
	}

	It("writes a kubeconfig that verifies the API server against the cluster's CA", func(ctx SpecContext) {
		cfg, err := clientcmd.BuildConfigFromFlags("", cluster.Kubeconfig())
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Insecure).To(BeFalse())
		Expect(cfg.CAData).NotTo(BeEmpty())
		cs, err := kubernetes.NewForConfig(cfg)
		Expect(err).NotTo(HaveOccurred())
		Expect(cs.Discovery().ServerVersion()).To(HaveField("Major", "1"))
	})

	It("runs the pods of a Deployment on the simulated node", func(ctx SpecContext) {
		labels := map[string]string{"app": "web"}
		_, err := client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Replicas: new(int32(2)),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       podSpec("256Mi"),
				},
			},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		Eventually(func(g Gomega) {
			c, cancel := testContext(ctx)
			defer cancel()
			pods, err := client.CoreV1().Pods(ns).List(c, metav1.ListOptions{LabelSelector: "app=web"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(pods.Items).To(HaveLen(2))
			for _, p := range pods.Items {
				g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
				g.Expect(p.Spec.NodeName).To(Equal("localkube-node-0"))
				g.Expect(condition(&p, corev1.PodReady)).To(Equal(corev1.ConditionTrue))
			}
		}).WithContext(ctx).Should(Succeed())
	})

	It("leaves a pod larger than any node Pending with the scheduler's reason", func(ctx SpecContext) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "huge"}, Spec: podSpec("1Ti")}
		_, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		Eventually(getPod(ctx, "huge")).WithContext(ctx).Should(HaveField("Status.Conditions", ContainElement(And(
			HaveField("Type", corev1.PodScheduled),
			HaveField("Status", corev1.ConditionFalse),
			HaveField("Reason", corev1.PodReasonUnschedulable),
			HaveField("Message", ContainSubstring("Insufficient memory")),
		))))
		Consistently(getPod(ctx, "huge")).WithContext(ctx).Should(And(
			HaveField("Status.Phase", corev1.PodPending),
			HaveField("Spec.NodeName", BeEmpty()),
		))
	})

	It("reports an annotated pod as crash-looping and a plain one as ready", func(ctx SpecContext) {
		crashing := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:        "crashing",
				Annotations: map[string]string{localkube.CrashAnnotation: "true"},
			},
			Spec: podSpec("64Mi"),
		}
		plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: podSpec("64Mi")}
		for _, p := range []*corev1.Pod{crashing, plain} {
			_, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}

		crashLooping := func(g Gomega, p *corev1.Pod) {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(condition(p, corev1.PodReady)).To(Equal(corev1.ConditionFalse))
			g.Expect(condition(p, corev1.ContainersReady)).To(Equal(corev1.ConditionFalse))
			g.Expect(p.Status.ContainerStatuses).To(HaveLen(1))
			cs := p.Status.ContainerStatuses[0]
			g.Expect(cs.Ready).To(BeFalse())
			g.Expect(cs.RestartCount).To(BeNumerically(">=", 1))
			g.Expect(cs.State.Waiting).NotTo(BeNil())
			g.Expect(cs.State.Waiting.Reason).To(Equal("CrashLoopBackOff"))
			g.Expect(cs.LastTerminationState.Terminated).NotTo(BeNil())
			g.Expect(cs.LastTerminationState.Terminated.ExitCode).To(Equal(int32(1)))
			g.Expect(cs.LastTerminationState.Terminated.Reason).NotTo(BeEmpty())
		}
		crashed := func(g Gomega) {
			p, err := getPod(ctx, "crashing")()
			g.Expect(err).NotTo(HaveOccurred())
			crashLooping(g, p)
		}
		Eventually(crashed).WithContext(ctx).Should(Succeed())
		// kwok's own pod-ready stage must not overwrite the crash later on.
		Consistently(crashed).WithContext(ctx).Should(Succeed())

		Eventually(getPod(ctx, "plain")).WithContext(ctx).Should(And(
			HaveField("Status.Phase", corev1.PodRunning),
			WithTransform(func(p *corev1.Pod) corev1.ConditionStatus { return condition(p, corev1.PodReady) }, Equal(corev1.ConditionTrue)),
			HaveField("Status.ContainerStatuses", ConsistOf(HaveField("State.Running", Not(BeNil())))),
		))
	})

	It("answers kubectl exec into a simulated pod with a command run unprivileged in the exec folder", func(ctx SpecContext) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "shell"}, Spec: podSpec("64Mi")}
		_, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(getPod(ctx, "shell")).WithContext(ctx).Should(HaveField("Status.Phase", corev1.PodRunning))

		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, filepath.Join(cluster.BinDir(), "kubectl"), "--kubeconfig", cluster.Kubeconfig(),
			"-n", ns, "exec", "shell", "--", "sh", "-c", "echo hi; echo oops >&2; pwd; id -u")
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		Expect(cmd.Run()).To(Succeed(), stderr.String())

		uid := os.Geteuid()
		if uid == 0 {
			nobody, err := user.Lookup("nobody")
			Expect(err).NotTo(HaveOccurred())
			uid, err = strconv.Atoi(nobody.Uid)
			Expect(err).NotTo(HaveOccurred())
		}
		Expect(stdout.String()).To(Equal(fmt.Sprintf("hi\n%s\n%d\n", cluster.ExecDir(), uid)))
		Expect(stderr.String()).To(Equal("oops\n"))
	})

	It("keeps working after the API server is stopped and started again", Serial, func(ctx SpecContext) {
		Expect(cluster.StopAPIServer()).To(Succeed())
		_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		Expect(err).To(HaveOccurred())
		// Long enough for the controllers' watches to back off for seconds (as a slow restart
		// on a busy machine does), so that they learn of new namespaces late.
		time.Sleep(12 * time.Second)

		Expect(cluster.StartAPIServer(ctx)).To(Succeed())
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "after-restart"}, Spec: podSpec("64Mi")}
		_, err = client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(getPod(ctx, "after-restart")).WithContext(ctx).Should(HaveField("Status.Phase", corev1.PodRunning))

		// A namespace made right after takes a pod at once: CreateNamespace waited for its
		// default ServiceAccount, without which the API server refuses the pod.
		fresh, err := cluster.CreateNamespace(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "localkube-after-"}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) {
			Expect(client.CoreV1().Namespaces().Delete(ctx, fresh.Name, metav1.DeleteOptions{})).To(Succeed())
		})
		_, err = client.CoreV1().Pods(fresh.Name).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}, Spec: podSpec("64Mi")}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	})
})

var _ = Describe("Start and Stop", func() {
	It("starts several nodes of the asked size and leaves no process or folder behind", func(ctx SpecContext) {
		c, err := localkube.Start(ctx, localkube.Options{
			BinDir: binDir, Nodes: 2, NodeCPU: "4", NodeMemory: "8Gi", NodePods: "1000", Log: GinkgoWriter,
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(c.Stop)

		nodes, err := c.Clientset().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(nodes.Items).To(HaveLen(2))
		for _, n := range nodes.Items {
			Expect(n.Status.Allocatable.Memory().Equal(resource.MustParse("8Gi"))).To(BeTrue())
			Expect(n.Status.Allocatable.Pods().Value()).To(Equal(int64(1000)))
			Expect(n.Status.Capacity.StorageEphemeral().Equal(resource.MustParse("1Ti"))).To(BeTrue())
		}

		pids := c.PIDs()
		Expect(pids).To(HaveLen(5))
		Expect(c.Stop()).To(Succeed())
		expectAllGone(pids)
		Expect(c.WorkDir()).NotTo(BeADirectory())
		Expect(c.Stop()).To(Succeed(), "a second Stop is harmless")
	})

	It("fails with the failing component's output and stops what it started", func(ctx SpecContext) {
		// A bin folder whose kube-apiserver exits at once: etcd starts, the API server does not.
		bin := GinkgoT().TempDir()
		for _, name := range []string{"etcd", "kube-controller-manager", "kube-scheduler", "kwok", localkube.StagesFile, localkube.CRDsFile} {
			Expect(os.Symlink(filepath.Join(binDir, name), filepath.Join(bin, name))).To(Succeed())
		}
		script := "#!/bin/sh\necho 'cannot start: the flux capacitor is missing' >&2\nexit 3\n"
		Expect(os.WriteFile(filepath.Join(bin, "kube-apiserver"), []byte(script), 0o755)).To(Succeed())

		work := GinkgoT().TempDir()
		_, err := localkube.Start(ctx, localkube.Options{BinDir: bin, WorkDir: work})
		Expect(err).To(MatchError(And(
			ContainSubstring("kube-apiserver exited"),
			ContainSubstring("the flux capacitor is missing"),
		)))
		Expect(processesMentioning(work)).To(BeEmpty(), "etcd was stopped")
		entries, err := os.ReadDir(work)
		Expect(err).NotTo(HaveOccurred())
		Expect(entries).To(BeEmpty(), "the cluster's own folder is removed")
	})
})

func podSpec(memory string) corev1.PodSpec {
	return corev1.PodSpec{
		Containers: []corev1.Container{{
			Name:  "app",
			Image: "busybox",
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)},
			},
		}},
	}
}

func condition(p *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// processesMentioning lists the live processes whose command line contains s.
func processesMentioning(s string) []string {
	GinkgoHelper()
	dirs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	Expect(err).NotTo(HaveOccurred())
	var found []string
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the process ended while we looked
		}
		if cmd := strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(cmd, s) {
			found = append(found, cmd)
		}
	}
	return found
}

// expectAllGone checks that no process with these ids is left (kill -0 fails for each).
func expectAllGone(pids []int) {
	GinkgoHelper()
	for _, pid := range pids {
		Expect(syscall.Kill(pid, 0)).To(MatchError(syscall.ESRCH), fmt.Sprintf("process %d is still alive", pid))
	}
}
