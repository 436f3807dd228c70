package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/testsupport/fixture"
)

// app is one CC process as a test desires it.
type app struct {
	guid, version string
	instances     int
	memoryMB      int
	annotation    string
	extra         map[string]any
}

func newApp() *app {
	return &app{guid: fixture.NewGUID(), version: fixture.NewGUID(), instances: 2, memoryMB: 64, annotation: "1600000000.2499998"}
}

func (a *app) processGUID() string { return a.guid + "-" + a.version }
func (a *app) path() string        { return "/apps/" + a.guid + "/" + a.version }

// body is the DesireLRPRequest CC would send for the app.
func (a *app) body() string {
	return fixture.DesireLRP(a.guid, a.version).Merge(map[string]any{
		"instances": a.instances, "memory_mb": a.memoryMB, "last_updated": a.annotation,
	}).Merge(a.extra).JSON()
}

func desire(o *opiServer, a *app) {
	status, body := o.call("PUT", "/apps/"+a.processGUID(), a.body())
	ExpectWithOffset(1, status).To(Equal(http.StatusAccepted), body)
	ExpectWithOffset(1, body).To(MatchJSON(`{}`))
}

func instances(o *opiServer, a *app) models.InstancesResponse {
	status, body := o.call("GET", a.path()+"/instances", "")
	ExpectWithOffset(1, status).To(Equal(http.StatusOK), body)
	ExpectWithOffset(1, body).NotTo(ContainSubstring(`"error"`))
	var resp models.InstancesResponse
	ExpectWithOffset(1, json.Unmarshal([]byte(body), &resp)).To(Succeed())
	return resp
}

func states(resp models.InstancesResponse) []string {
	out := []string{}
	for _, in := range resp.Instances {
		out = append(out, in.State)
	}
	return out
}

func allRunning(o *opiServer, a *app) func() []string {
	return func() []string { return states(instances(o, a)) }
}

// runningApp starts opi for ns (opiArgs added to its flags) and desires an app of one instance
// through it; it returns both once the instance is RUNNING.
func runningApp(ns string, opiArgs ...string) (*opiServer, *app) {
	GinkgoHelper()
	o := startOpi(ns, opiArgs...)
	a := newApp()
	a.instances = 1
	desire(o, a)
	Eventually(allRunning(o, a)).Should(Equal(running(1)))
	return o, a
}

func running(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "RUNNING"
	}
	return out
}

func selector(a *app) string {
	return "opi-bridge.io/guid=" + a.guid + ",opi-bridge.io/version=" + a.version
}

func pods(ns string, a *app) []corev1.Pod {
	list, err := kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector(a)})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return list.Items
}

// livePodNames are the pods not being deleted, in opi's index order: by creation time then
// name (Deployments), by ordinal (StatefulSets).
func livePodNames(ns string, a *app) []string {
	ps := pods(ns, a)
	sort.Slice(ps, func(i, j int) bool {
		if statefulSets() {
			return ordinal(&ps[i]) < ordinal(&ps[j])
		}
		if !ps[i].CreationTimestamp.Equal(&ps[j].CreationTimestamp) {
			return ps[i].CreationTimestamp.Before(&ps[j].CreationTimestamp)
		}
		return ps[i].Name < ps[j].Name
	})
	names := []string{}
	for _, p := range ps {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	return names
}

// liveUIDs are the uids of livePodNames' pods, in the same order: a StatefulSet's replacement of
// a pod has that pod's name, never its uid.
func liveUIDs(ns string, a *app) []string {
	byName := map[string]string{}
	for _, p := range pods(ns, a) {
		byName[p.Name] = string(p.UID)
	}
	out := []string{}
	for _, name := range livePodNames(ns, a) {
		out = append(out, byName[name])
	}
	return out
}

// ownedObjects counts what is left of an app in Kubernetes: every kind opi or its controllers make.
func ownedObjects(ns string, a *app) int {
	GinkgoHelper()
	return len(leftObjects(ns, a))
}

// leftObjects names what is left of an app in Kubernetes ("Kind/name", with "(deleting)" on an
// object being deleted): every kind opi or its controllers make. A spec waiting for an app to
// be gone waits for this to be empty, so a failure says what stayed.
func leftObjects(ns string, a *app) []string {
	GinkgoHelper()
	ctx := context.Background()
	opts := metav1.ListOptions{LabelSelector: selector(a)}
	var out []string
	add := func(kind string, meta metav1.Object) {
		name := kind + "/" + meta.GetName()
		if meta.GetDeletionTimestamp() != nil {
			name += " (deleting)"
		}
		out = append(out, name)
	}
	for _, w := range workloads(ns, a) {
		add("workload", &w.ObjectMeta)
	}
	for _, p := range pods(ns, a) {
		add("Pod", &p)
	}
	rs, err := kube.AppsV1().ReplicaSets(ns).List(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	for i := range rs.Items {
		add("ReplicaSet", &rs.Items[i])
	}
	revisions, err := kube.AppsV1().ControllerRevisions(ns).List(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	for i := range revisions.Items {
		add("ControllerRevision", &revisions.Items[i])
	}
	secrets, err := kube.CoreV1().Secrets(ns).List(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	for i := range secrets.Items {
		add("Secret", &secrets.Items[i])
	}
	services, err := kube.CoreV1().Services(ns).List(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	for i := range services.Items {
		add("Service", &services.Items[i])
	}
	budgets, err := kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	for i := range budgets.Items {
		add("PodDisruptionBudget", &budgets.Items[i])
	}
	return out
}

// appState is what a request could have changed of an app: every object opi writes, by what
// opi writes of it (controllers keep updating a Deployment's status, so not its resourceVersion).
type appState struct {
	Deployments []string
	Secrets     []string
	Services    []string
}

// writtenByOpi leaves out the annotations Kubernetes' own controllers write on a workload (the
// deployment controller's revision, whenever it gets to a new Deployment): a snapshot compares
// what opi wrote.
func writtenByOpi(annotations map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range annotations {
		if !strings.HasPrefix(k, "deployment.kubernetes.io/") {
			out[k] = v
		}
	}
	return out
}

func snapshot(ns string, a *app) appState {
	ctx := context.Background()
	opts := metav1.ListOptions{LabelSelector: selector(a)}
	var st appState
	for _, d := range workloads(ns, a) {
		spec, err := json.Marshal(d.rawSpec)
		Expect(err).NotTo(HaveOccurred())
		st.Deployments = append(st.Deployments, fmt.Sprintf("%s gen=%d labels=%v annotations=%v spec=%s", d.Name, d.Generation, d.Labels, writtenByOpi(d.Annotations), spec))
	}
	secrets, err := kube.CoreV1().Secrets(ns).List(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	for _, s := range secrets.Items {
		st.Secrets = append(st.Secrets, s.Name+"@"+s.ResourceVersion)
	}
	services, err := kube.CoreV1().Services(ns).List(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	for _, s := range services.Items {
		st.Services = append(st.Services, s.Name+"@"+s.ResourceVersion)
	}
	return st
}

var _ = Describe("LRPs on Kubernetes", func() {
	var (
		o  *opiServer
		ns string
		a  *app
	)

	BeforeEach(func() {
		ns = newNamespace()
		o = startOpi(ns)
		a = newApp()
	})

	It("runs a desired app as a Deployment (or StatefulSet) with its Secret and Service, and reports it to CC", func() {
		desire(o, a)

		By("listing it at once, annotation byte for byte, in Diego's shape")
		status, body := o.call("GET", "/apps", "")
		Expect(status).To(Equal(http.StatusOK))
		var list models.DesiredLRPSchedulingInfosResponse
		Expect(json.Unmarshal([]byte(body), &list)).To(Succeed())
		Expect(list.DesiredLRPSchedulingInfos).To(HaveLen(1))
		info := list.DesiredLRPSchedulingInfos[0]
		Expect(info.DesiredLRPKey).To(Equal(models.DesiredLRPKey{ProcessGUID: a.processGUID(), Domain: "cf-apps", LogGUID: "app-" + a.guid}))
		Expect(info.Annotation).To(Equal("1600000000.2499998"))
		Expect(info.Instances).To(BeEquivalentTo(2))
		Expect(info.DesiredLRPResource).To(Equal(models.DesiredLRPResource{MemoryMB: 64, DiskMB: 256}))
		Expect(info.GUID).To(Equal(a.guid))
		Expect(info.Version).To(Equal(a.version))
		Expect(info.ModificationTag.Epoch).NotTo(BeEmpty())
		Expect(body).To(ContainSubstring(`"annotation":"1600000000.2499998"`))

		By("getting it")
		status, body = o.call("GET", a.path(), "")
		Expect(status).To(Equal(http.StatusOK))
		var got models.DesiredLRPResponse
		Expect(json.Unmarshal([]byte(body), &got)).To(Succeed())
		Expect(got.DesiredLRP.ProcessGUID).To(Equal(a.processGUID()))
		Expect(got.DesiredLRP.Instances).To(BeEquivalentTo(2))
		Expect(got.DesiredLRP.Annotation).To(Equal("1600000000.2499998"))
		Expect(got.DesiredLRP.Image).To(Equal("cloudfoundry/dora:latest"))
		Expect(got.DesiredLRP.Ports).To(Equal([]int32{8080}))
		Expect(got.DesiredLRP.MemoryMB).To(BeEquivalentTo(64))
		Expect(got.DesiredLRP.Routes).To(Equal(map[string][]models.Route{"cf-router": {{Hostname: "dora.example.com", Port: 8080}}}))

		By("holding one Deployment with CF's labels and annotations and no secret in them")
		ds := workloads(ns, a)
		Expect(ds).To(HaveLen(1))
		d := ds[0]
		Expect(len(d.Name)).To(BeNumerically("<=", 63))
		Expect(d.Name).To(HavePrefix("dora-the-app-dev-"))
		Expect(d.Labels).To(HaveKeyWithValue("opi-bridge.io/app-guid", "app-"+a.guid))
		Expect(d.Labels).To(HaveKeyWithValue("opi-bridge.io/process-type", "web"))
		Expect(d.Labels).To(HaveKeyWithValue("opi-bridge.io/source-type", "APP"))
		Expect(d.Annotations).To(HaveKeyWithValue("opi-bridge.io/process-guid", a.processGUID()))
		Expect(d.Annotations).To(HaveKeyWithValue("opi-bridge.io/last-updated", "1600000000.2499998"))
		Expect(d.Annotations).To(HaveKeyWithValue("opi-bridge.io/app-name", "Dora The App"))
		Expect(d.Annotations).To(HaveKeyWithValue("opi-bridge.io/space-name", "dev"))
		Expect(d.Annotations).To(HaveKeyWithValue("opi-bridge.io/org-name", "acme"))
		Expect(d.Annotations).To(HaveKey("opi-bridge.io/routes"))
		Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue("prometheus.io/scrape", "true"))
		Expect(*d.Spec.Replicas).To(BeEquivalentTo(2))

		pod := d.Spec.Template.Spec
		Expect(*pod.AutomountServiceAccountToken).To(BeFalse())
		Expect(*pod.TerminationGracePeriodSeconds).To(BeEquivalentTo(10))
		c := pod.Containers[0]
		Expect(c.Image).To(Equal("cloudfoundry/dora:latest"))
		Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
		Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
		Expect(c.SecurityContext.Capabilities.Add).To(ContainElements(corev1.Capability("CHOWN"), corev1.Capability("SETUID")),
			"Diego's default capabilities, so that root images run")
		Expect(pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
		Expect(c.Resources.Limits.Memory().String()).To(Equal("64Mi"))
		Expect(c.Resources.Requests.Memory().String()).To(Equal("64Mi"))
		Expect(c.Resources.Limits.StorageEphemeral().String()).To(Equal("256Mi"))
		Expect(c.Resources.Limits.Cpu().IsZero()).To(BeTrue())
		Expect(c.StartupProbe.TCPSocket.Port.IntValue()).To(Equal(8080))
		Expect(c.StartupProbe.FailureThreshold).To(BeEquivalentTo(30), "start_timeout_ms 60000 at one check every 2 s")
		Expect(c.LivenessProbe.TimeoutSeconds).To(BeEquivalentTo(1), "each check takes at most a second, whatever the start timeout")
		Expect(c.ReadinessProbe).NotTo(BeNil())

		envs := map[string]corev1.EnvVar{}
		for _, e := range c.Env {
			Expect(e.Value).NotTo(ContainSubstring("marked-secret-value"))
			envs[e.Name] = e
		}
		for _, name := range []string{"VCAP_SERVICES", "PORT", "spring.profiles.active", "key:with:colons"} {
			Expect(envs).To(HaveKey(name))
			Expect(envs[name].ValueFrom.SecretKeyRef).NotTo(BeNil(), name)
		}
		Expect(envs["CF_INSTANCE_GUID"].ValueFrom.FieldRef.FieldPath).To(Equal("metadata.uid"))
		Expect(envs["CF_INSTANCE_IP"].ValueFrom.FieldRef.FieldPath).To(Equal("status.hostIP"))
		Expect(envs["CF_INSTANCE_INTERNAL_IP"].ValueFrom.FieldRef.FieldPath).To(Equal("status.podIP"))
		Expect(envs).To(HaveKey("CF_INSTANCE_PORT"))
		Expect(envs).To(HaveKey("CF_INSTANCE_ADDR"))
		Expect(envs).To(HaveKey("CF_INSTANCE_PORTS"))

		By("keeping the environment in a Secret named after the workload, every name reaching the app unchanged")
		secretName := envs["VCAP_SERVICES"].ValueFrom.SecretKeyRef.Name
		secret, err := kube.CoreV1().Secrets(ns).Get(context.Background(), secretName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(secret.Name).To(Equal(d.Name + "-env"))
		Expect(secret.OwnerReferences).To(BeEmpty(), "created beside the workload; a stop deletes it by name")
		for name, want := range map[string]string{"VCAP_SERVICES": `{"db":[{"credentials":{"password":"marked-secret-value"}}]}`, "key:with:colons": "colons", "spring.profiles.active": "cloud"} {
			Expect(string(secret.Data[envs[name].ValueFrom.SecretKeyRef.Key])).To(Equal(want), name)
		}

		By("serving its port through a Service it owns")
		services, err := kube.CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector(a)})
		Expect(err).NotTo(HaveOccurred())
		Expect(services.Items).To(HaveLen(1))
		Expect(services.Items[0].Spec.Ports[0].Port).To(BeEquivalentTo(8080))
		Expect(services.Items[0].OwnerReferences).To(ContainElement(HaveField("UID", d.UID)))

		By("running its pods and reporting every instance RUNNING")
		Eventually(allRunning(o, a)).Should(Equal(running(2)))
		resp := instances(o, a)
		Expect(resp.ProcessGUID).To(Equal(a.processGUID()))
		for i, in := range resp.Instances {
			Expect(in.Index).To(BeEquivalentTo(i))
			Expect(in.Since).To(BeNumerically(">", int64(1e18)), "since is Unix nanoseconds")
		}
		for _, p := range pods(ns, a) {
			Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}

		By("showing the same to an operator's kubectl")
		// The workload's controller writes its status a moment after the pods turn ready.
		Eventually(func() string {
			return kubectl("-n", ns, "get", workloadResource(), "-l", selector(a), "-o", "jsonpath={.items[*].status.readyReplicas}")
		}).Should(Equal("2"))

		By("writing no secret value into any label or annotation, and none into opi's logs")
		Expect(o.Logs()).NotTo(ContainSubstring("marked-secret-value"))
		all := kubectl("-n", ns, "get", "deployments,statefulsets,replicasets,controllerrevisions,pods,services", "-o", "json")
		Expect(all).NotTo(ContainSubstring("marked-secret-value"))
	})

	It("treats a re-desire as a success that changes nothing", func() {
		desire(o, a)
		before := snapshot(ns, a)
		desire(o, a)
		desire(o, a)
		Expect(workloads(ns, a)).To(HaveLen(1))
		Expect(snapshot(ns, a)).To(Equal(before))
	})

	It("scales 2 → 4, changes routes, annotation and image on update, and reads reflect it at once", func() {
		desire(o, a)
		Eventually(allRunning(o, a)).Should(Equal(running(2)))

		status, body := o.call("POST", "/apps/"+a.processGUID(), fixture.UpdateLRP(a.guid, a.version, map[string]any{
			"instances": 4, "annotation": "1700000000.5",
			"routes": map[string]any{"cf-router": fixture.Routes("new.example.com", 8080)["cf-router"], "tcp-router": []any{}},
		}).JSON())
		Expect(status).To(Equal(http.StatusOK), body)
		Expect(body).To(MatchJSON(`{}`))

		status, body = o.call("GET", a.path(), "")
		Expect(status).To(Equal(http.StatusOK))
		var got models.DesiredLRPResponse
		Expect(json.Unmarshal([]byte(body), &got)).To(Succeed())
		Expect(got.DesiredLRP.Instances).To(BeEquivalentTo(4))
		Expect(got.DesiredLRP.Annotation).To(Equal("1700000000.5"))
		Expect(got.DesiredLRP.Routes["cf-router"]).To(Equal([]models.Route{{Hostname: "new.example.com", Port: 8080}}))

		Eventually(allRunning(o, a)).Should(Equal(running(4)))
		Expect(*workloads(ns, a)[0].Spec.Replicas).To(BeEquivalentTo(4))

		status, _ = o.call("POST", "/apps/"+a.processGUID(), fixture.UpdateLRP(a.guid, a.version, map[string]any{"image": "cloudfoundry/dora:v2"}).JSON())
		Expect(status).To(Equal(http.StatusOK))
		Expect(workloads(ns, a)[0].Spec.Template.Spec.Containers[0].Image).To(Equal("cloudfoundry/dora:v2"))
		Eventually(allRunning(o, a)).Should(Equal(running(4)))
	})

	It("answers 404 with Diego's text for get and update of an absent app", func() {
		status, body := o.call("GET", a.path(), "")
		Expect(status).To(Equal(http.StatusNotFound))
		Expect(body).To(MatchJSON(`{"error":{"message":"the requested resource could not be found"}}`))

		status, body = o.call("POST", "/apps/"+a.processGUID(), fixture.UpdateLRP(a.guid, a.version, map[string]any{"instances": 1}).JSON())
		Expect(status).To(Equal(http.StatusNotFound))
		Expect(body).To(MatchJSON(`{"error":{"message":"the requested resource could not be found"}}`))

		status, body = o.call("GET", a.path()+"/instances", "")
		Expect(status).To(Equal(http.StatusNotFound))
		Expect(body).To(MatchJSON(`{"process_guid":"` + a.processGUID() + `","instances":[],"error":"failed to get instances for app: not found"}`))
	})

	It("stops exactly the instance CC names and the workload brings it back RUNNING", func() {
		desire(o, a)
		Eventually(allRunning(o, a)).Should(Equal(running(2)))
		uids := func() []string { return liveUIDs(ns, a) }
		before := uids()
		Expect(before).To(HaveLen(2))

		status, body := o.call("PUT", a.path()+"/stop/1", "")
		Expect(status).To(Equal(http.StatusOK), body)
		Expect(body).To(MatchJSON(`{}`))

		Eventually(uids).Should(And(HaveLen(2), ContainElement(before[0]), Not(ContainElement(before[1]))))
		Eventually(allRunning(o, a)).Should(Equal(running(2)))

		By("rejecting indexes outside 0..instances-1 and unknown apps")
		status, _ = o.call("PUT", a.path()+"/stop/2", "")
		Expect(status).To(Equal(http.StatusBadRequest))
		status, _ = o.call("PUT", a.path()+"/stop/-1", "")
		Expect(status).To(Equal(http.StatusBadRequest))
		status, _ = o.call("PUT", "/apps/"+fixture.NewGUID()+"/"+fixture.NewGUID()+"/stop/0", "")
		Expect(status).To(Equal(http.StatusNotFound))
		Expect(livePodNames(ns, a)).To(HaveLen(2))
	})

	It("stops an app: gone from reads at once, every owned object removed, re-stop succeeds", func() {
		desire(o, a)
		Eventually(allRunning(o, a)).Should(Equal(running(2)))
		Expect(ownedObjects(ns, a)).To(BeNumerically(">=", 6)) // workload, replicaset or revision, 2 pods, secret, service

		status, body := o.call("PUT", a.path()+"/stop", "")
		Expect(status).To(Equal(http.StatusOK), body)
		Expect(body).To(MatchJSON(`{}`))
		secrets, err := kube.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector(a)})
		Expect(err).NotTo(HaveOccurred())
		Expect(secrets.Items).To(BeEmpty(), "its credentials deleted before the answer, not left to the garbage collector")

		status, body = o.call("GET", "/apps", "")
		Expect(status).To(Equal(http.StatusOK))
		Expect(body).To(MatchJSON(`{"desired_lrp_scheduling_infos":[]}`))
		status, _ = o.call("GET", a.path(), "")
		Expect(status).To(Equal(http.StatusNotFound))

		Eventually(func() []string { return leftObjects(ns, a) }).Should(BeEmpty())

		status, body = o.call("PUT", a.path()+"/stop", "")
		Expect(status).To(Equal(http.StatusOK))
		Expect(body).To(MatchJSON(`{}`))
	})

	It("loses nothing when opi is killed and restarted", func() {
		desire(o, a)
		other := newApp()
		other.annotation = "2.0"
		desire(o, other)

		o.restart()

		status, body := o.call("GET", "/apps", "")
		Expect(status).To(Equal(http.StatusOK))
		var list models.DesiredLRPSchedulingInfosResponse
		Expect(json.Unmarshal([]byte(body), &list)).To(Succeed())
		annotations := map[string]string{}
		for _, info := range list.DesiredLRPSchedulingInfos {
			annotations[info.DesiredLRPKey.ProcessGUID] = info.Annotation
		}
		Expect(annotations).To(Equal(map[string]string{a.processGUID(): "1600000000.2499998", other.processGUID(): "2.0"}))
		Eventually(allRunning(o, a)).Should(Equal(running(2)))
	})

	It("keeps private registry credentials in a pull Secret only", func() {
		a.extra = map[string]any{"lifecycle": fixture.RegistryCredentials(
			fixture.DockerLifecycle("registry.example.com/team/dora:v1", []string{"/bin/sh", "-c", "./dora"}),
			"robot", "marked-registry-password")}
		desire(o, a)
		d := workloads(ns, a)[0]
		Expect(d.Spec.Template.Spec.ImagePullSecrets).To(HaveLen(1))
		Expect(d.Spec.Template.Spec.Containers[0].Command).To(Equal([]string{"/bin/sh", "-c", "./dora"}))
		pull, err := kube.CoreV1().Secrets(ns).Get(context.Background(), d.Spec.Template.Spec.ImagePullSecrets[0].Name, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(pull.Type).To(Equal(corev1.SecretTypeDockerConfigJson))
		var cfg struct {
			Auths map[string]struct{ Username, Password string } `json:"auths"`
		}
		Expect(json.Unmarshal(pull.Data[corev1.DockerConfigJsonKey], &cfg)).To(Succeed())
		Expect(cfg.Auths).To(HaveKey("registry.example.com"))
		Expect(cfg.Auths["registry.example.com"].Password).To(Equal("marked-registry-password"))
		Expect(pull.OwnerReferences).To(BeEmpty())
		Expect(o.Logs()).NotTo(ContainSubstring("marked-registry-password"))
		Expect(kubectl("-n", ns, "get", "deployments,statefulsets,pods", "-o", "json")).NotTo(ContainSubstring("marked-registry-password"))
	})

	It("creates no Service for a process without ports", func() {
		a.extra = map[string]any{"ports": []int{}, "health_check_type": "process", "routes": map[string]any{}}
		desire(o, a)
		services, err := kube.CoreV1().Services(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector(a)})
		Expect(err).NotTo(HaveOccurred())
		Expect(services.Items).To(BeEmpty())
		c := workloads(ns, a)[0].Spec.Template.Spec.Containers[0]
		Expect(c.StartupProbe).To(BeNil())
		Expect(c.LivenessProbe).To(BeNil())
		Eventually(allRunning(o, a)).Should(Equal(running(2)))
	})

	It("reports an instance that cannot be placed as UNCLAIMED with Diego's placement error", func() {
		a.instances = 1
		a.memoryMB = 64 * 1024 // more than the node has
		desire(o, a)
		Eventually(func() []models.Instance { return instances(o, a).Instances }).Should(ConsistOf(
			And(HaveField("State", "UNCLAIMED"), HaveField("PlacementError", "Insufficient resources: memory"), HaveField("Index", BeEquivalentTo(0)))))
	})

	It("reports a crash-looping instance as CRASHED", func() {
		a.instances = 1
		// localkube's kwok stage makes such pods look as a kubelet reports a crash loop.
		a.extra = map[string]any{"user_defined_annotations": map[string]string{"localkube.opi-bridge/crash": "true"}}
		desire(o, a)
		Eventually(func() []string { return states(instances(o, a)) }).Should(Equal([]string{"CRASHED"}))
	})

	It("rejects bad input with the contract's error and changes nothing", func() {
		desire(o, a)
		Eventually(allRunning(o, a)).Should(Equal(running(2)))
		before := snapshot(ns, a)
		podsBefore := livePodNames(ns, a)

		cases := []struct {
			method, path, body string
			status             int
			message            string
		}{
			{"PUT", "/apps/" + a.processGUID(), `{"guid":`, 400, "invalid request body"},
			{"PUT", "/apps/" + a.processGUID(), ``, 400, "request body is empty"},
			{"PUT", "/apps/" + a.processGUID(), strings.Replace(a.body(), `"memory_mb":64`, `"memory_mb":0`, 1), 400, "memory_mb"},
			{"PUT", "/apps/" + a.processGUID(), strings.Replace(a.body(), `"instances":2`, `"instances":"2"`, 1), 400, "instances"},
			{"PUT", "/apps/other-process", a.body(), 400, "does not match"},
			{"POST", "/apps/" + a.processGUID(), fixture.UpdateLRP(a.guid, a.version, map[string]any{"instances": -1}).JSON(), 400, "update.instances"},
			{"POST", "/apps/" + a.processGUID(), ``, 400, "request body is empty"},
			{"PUT", a.path() + "/stop/x", "", 400, "not a non-negative integer"},
			{"PUT", a.path() + "/stop/7", "", 400, "index"},
			{"DELETE", "/apps/" + a.processGUID(), "", 405, "not allowed"},
			{"GET", "/v2/apps", "", 404, "no route"},
		}
		for _, c := range cases {
			status, body := o.call(c.method, c.path, c.body)
			Expect(status).To(Equal(c.status), "%s %s: %s", c.method, c.path, body)
			var e models.ErrorResponse
			Expect(json.Unmarshal([]byte(body), &e)).To(Succeed(), body)
			Expect(e.Error.Message).To(ContainSubstring(c.message), fmt.Sprintf("%s %s", c.method, c.path))
		}
		Expect(snapshot(ns, a)).To(Equal(before))
		Expect(livePodNames(ns, a)).To(Equal(podsBefore))
	})
})

var _ = Describe("opi start-up", func() {
	It("creates its namespace when it is missing and it may", func() {
		ns := newNamespace()
		o := startOpiWith(cluster.Kubeconfig(), ns)
		_, err := kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		a := newApp()
		desire(o, a)
		Eventually(allRunning(o, a)).Should(Equal(running(2)))
	})

	It("keeps serving past its cache-sync timeout instead of exiting, and becomes ready once synced", func() {
		ns := newNamespace()
		kubeconfig := restrictedKubeconfig(ns)
		a := newApp()
		before := startOpiWith(kubeconfig, ns, "--create-namespace=false")
		desire(before, a)
		before.stop()

		// With the timeout passed before any LIST can answer, opi must say the sync is slow and
		// wait (its LIST check passing under deploy/rbac.yaml), not exit; startOpiWith waits for
		// /readyz.
		o := startOpiWith(kubeconfig, ns, "--create-namespace=false", "--cache-sync-timeout", "1ns")
		Expect(o.session.ExitCode()).To(Equal(-1), "opi exited; it said:\n%s", o.Logs())
		Expect(o.Logs()).To(ContainSubstring("cache-sync-slow"))
		Expect(o.Logs()).To(ContainSubstring("caches-synced"))
		status, body := o.call(http.MethodGet, "/apps", "")
		Expect(status).To(Equal(http.StatusOK), body)
		Expect(body).To(ContainSubstring(a.processGUID()))
	})

	It("refuses to start when the namespace is missing and it may not create it", func() {
		ns := "opi-it-missing"
		_, err := kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
		session := runOpiOnce("connect", "--kubeconfig", cluster.Kubeconfig(), "--listen", freeAddr(), "--namespace", ns, "--create-namespace=false")
		Expect(session.ExitCode()).NotTo(Equal(0))
		Expect(string(session.Err.Contents())).To(ContainSubstring(ns))
	})
})
