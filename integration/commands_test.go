package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/testsupport/ccstandin"
	"github.com/opi-bridge/opi/testsupport/fixture"
)

// The calls below are the ones CC's OPI client makes for a CLI command: its desire handler
// reads the LRP of the process's current version first, updates it when found (instances, the
// process's routes and a new annotation, always all three) and desires it when absent; stop and
// stop-instance name the version in the path.

// ccScale is what CC sends when a process's instances change (`cf scale -i`): the read that
// finds the LRP, then the update.
func ccScale(o *opiServer, a *app, instances int, annotation string) {
	GinkgoHelper()
	status, body := o.call(http.MethodGet, a.path(), "")
	Expect(status).To(Equal(http.StatusOK), body)
	update := map[string]any{"instances": instances, "routes": fixture.Routes("dora.example.com", 8080), "annotation": annotation}
	status, body = o.call(http.MethodPost, "/apps/"+a.processGUID(), fixture.UpdateLRP(a.guid, a.version, update).JSON())
	Expect(status).To(Equal(http.StatusOK), body)
	Expect(body).To(MatchJSON(`{}`))
}

// ccStart is what CC sends when a process version starts: the read that finds nothing, then the
// desire.
func ccStart(o *opiServer, a *app) {
	GinkgoHelper()
	status, body := o.call(http.MethodGet, a.path(), "")
	Expect(status).To(Equal(http.StatusNotFound), body)
	desire(o, a)
}

// ccStop is what CC sends when a process version stops, whether opi runs it or not.
func ccStop(o *opiServer, a *app) {
	GinkgoHelper()
	status, body := o.call(http.MethodPut, a.path()+"/stop", "")
	Expect(status).To(Equal(http.StatusOK), body)
	Expect(body).To(MatchJSON(`{}`))
}

// nextVersion is the process a with the new version CC gives it when it starts again (and
// when its memory changes while started): the same guid, body and routes.
func nextVersion(a *app, annotation string) *app {
	next := *a
	next.version = fixture.NewGUID()
	next.annotation = annotation
	return &next
}

// expectOnlyVersion checks what CC and kubectl see once a process version replaced another:
// only the new one listed and RUNNING with all its instances, the old one absent to every read
// CC makes (with the words CC needs for a stopped process) and nothing of it left in Kubernetes.
func expectOnlyVersion(o *opiServer, ns string, current, old *app) {
	GinkgoHelper()
	Expect(listed(o)).To(Equal(map[string]string{current.processGUID(): current.annotation}))
	Eventually(allRunning(o, current)).Should(Equal(running(current.instances)))
	status, body := o.call(http.MethodGet, old.path(), "")
	Expect(status).To(Equal(http.StatusNotFound), body)
	status, body = o.call(http.MethodGet, old.path()+"/instances", "")
	Expect(status).To(Equal(http.StatusNotFound), body)
	Expect(body).To(ContainSubstring("not found"))
	Eventually(func() []string { return leftObjects(ns, old) }).Should(BeEmpty())
	Expect(workloads(ns, current)).To(HaveLen(1))
}

var _ = Describe("The commands around a process, as CC sends them", func() {
	var (
		o  *opiServer
		cc *ccstandin.Server
		ns string
		a  *app
	)

	BeforeEach(func() {
		ns = newNamespace()
		cc = startCC() // tasks call back to CC
		o = startOpi(ns, cc.OpiArgs()...)
		a = newApp()
	})

	It("cf scale -i: the update of instances, with the process's routes and a new annotation, changes only the count", func() {
		desire(o, a)
		Eventually(allRunning(o, a)).Should(Equal(running(2)))
		template := workloads(ns, a)[0].Spec.Template
		first := liveUIDs(ns, a)

		By("scaling up: CC reads the new count and annotation at once, the rest as desired")
		ccScale(o, a, 3, "1700000000.1")
		status, body := o.call(http.MethodGet, a.path(), "")
		Expect(status).To(Equal(http.StatusOK), body)
		var got models.DesiredLRPResponse
		Expect(json.Unmarshal([]byte(body), &got)).To(Succeed())
		Expect(got.DesiredLRP.Instances).To(BeEquivalentTo(3))
		Expect(got.DesiredLRP.Annotation).To(Equal("1700000000.1"))
		Expect(got.DesiredLRP.MemoryMB).To(BeEquivalentTo(64))
		Expect(got.DesiredLRP.Routes).To(Equal(map[string][]models.Route{"cf-router": {{Hostname: "dora.example.com", Port: 8080}}}))
		Expect(listed(o)).To(Equal(map[string]string{a.processGUID(): "1700000000.1"}))

		By("the two instances keeping their pods, one added, the pod template untouched")
		Eventually(allRunning(o, a)).Should(Equal(running(3)))
		grown := liveUIDs(ns, a)
		Expect(grown).To(HaveLen(3))
		Expect(grown).To(ContainElements(first))
		w := workloads(ns, a)[0]
		Expect(*w.Spec.Replicas).To(BeEquivalentTo(3))
		Expect(w.Spec.Template).To(Equal(template), "no rollout")

		By("scaling down: one of those pods stays as instance 0, none is made")
		ccScale(o, a, 1, "1700000000.2")
		Eventually(func() []string { return liveUIDs(ns, a) }).Should(HaveLen(1))
		Expect(grown).To(ContainElement(liveUIDs(ns, a)[0]))
		Eventually(allRunning(o, a)).Should(Equal(running(1)))
		w = workloads(ns, a)[0]
		Expect(*w.Spec.Replicas).To(BeEquivalentTo(1))
		Expect(w.Spec.Template).To(Equal(template))
	})

	It("cf restart: the stop of the running version, then the desire of a new one, leaves only the new version's pods", func() {
		desire(o, a)
		Eventually(allRunning(o, a)).Should(Equal(running(2)))
		before := workloads(ns, a)[0].Spec.Template.Spec.Containers[0]
		beforeEnv := secretEnv(ns, before)

		ccStop(o, a)
		Expect(listed(o)).To(BeEmpty(), "a stopped version leaves CC's sync at once")
		restarted := nextVersion(a, "1700000000.3")
		ccStart(o, restarted)

		expectOnlyVersion(o, ns, restarted, a)
		after := workloads(ns, restarted)[0].Spec.Template.Spec.Containers[0]
		Expect(after.Image).To(Equal(before.Image))
		Expect(after.Resources).To(Equal(before.Resources))
		Expect(secretEnv(ns, after)).To(Equal(beforeEnv), "the same environment, in the new version's Secret")
	})

	It("cf scale -k: CC restarts the process the same way, the new version with the new disk", func() {
		desire(o, a)
		Eventually(allRunning(o, a)).Should(Equal(running(2)))

		// A disk change gives no new version: CC stops the running one, then starts a new one.
		ccStop(o, a)
		bigger := nextVersion(a, "1700000000.4")
		bigger.extra = map[string]any{"disk_mb": 512}
		ccStart(o, bigger)

		expectOnlyVersion(o, ns, bigger, a)
		c := workloads(ns, bigger)[0].Spec.Template.Spec.Containers[0]
		Expect(c.Resources.Limits.StorageEphemeral().String()).To(Equal("512Mi"))
		Expect(c.Resources.Limits.Memory().String()).To(Equal("64Mi"))
	})

	It("cf scale -m: the old version serves until CC's sync stops it, then only the new version with the new memory runs", func() {
		desire(o, a)
		Eventually(allRunning(o, a)).Should(Equal(running(2)))
		first := liveUIDs(ns, a)

		// CC saves the new memory with a new version and sends nothing; the CLI then stops the
		// app, which stops that version: opi does not run it, and the old one is untouched.
		saved := nextVersion(a, "1700000000.5")
		ccStop(o, saved)
		Expect(listed(o)).To(Equal(map[string]string{a.processGUID(): a.annotation}))
		Expect(liveUIDs(ns, a)).To(Equal(first))

		By("starting the app: a third version, desired with the new memory, beside the old one")
		larger := nextVersion(a, "1700000000.6")
		larger.memoryMB = 128
		ccStart(o, larger)
		Eventually(allRunning(o, larger)).Should(Equal(running(2)))
		Expect(listed(o)).To(Equal(map[string]string{a.processGUID(): a.annotation, larger.processGUID(): larger.annotation}))
		Expect(liveUIDs(ns, a)).To(Equal(first))

		By("CC's sync stopping the version it does not know")
		ccStop(o, a)
		expectOnlyVersion(o, ns, larger, a)
		Expect(workloads(ns, larger)[0].Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String()).To(Equal("128Mi"))
	})

	It("cf run-task --process: a task of the process's image, command and memory runs with them, and with its app's environment", func() {
		const command = "bundle exec rackup"
		a.memoryMB = 128
		a.extra = map[string]any{"lifecycle": fixture.DockerLifecycle("cloudfoundry/dora:latest", []string{"/bin/sh", "-c", command})}
		desire(o, a)
		lrp := workloads(ns, a)[0].Spec.Template.Spec.Containers[0]

		// CC's TaskRequest of a task from a process's template: the droplet's image, the
		// process's command with sh -c, its memory as MEMORY_LIMIT, the app's environment; no
		// disk or cpu.
		guid := fixture.NewGUID()
		env := fixture.DesireLRP(a.guid, a.version)["environment"].(map[string]string)
		body := fixture.Task(cc.URL+"/internal/v4/tasks/"+guid+"/completed", command).Merge(map[string]any{
			"app_guid": "app-" + a.guid, "app_name": "Dora The App", "space_guid": "space-1", "space_name": "dev",
			"environment": fixture.Env("MEMORY_LIMIT", "128m", "VCAP_SERVICES", env["VCAP_SERVICES"], "spring.profiles.active", env["spring.profiles.active"]),
			"lifecycle":   fixture.DockerLifecycle("cloudfoundry/dora:latest", []string{"/bin/sh", "-c", command}),
		})
		status, resp := o.call(http.MethodPost, "/tasks/"+guid, body.JSON())
		Expect(status).To(Equal(http.StatusAccepted), resp)

		job, err := kube.BatchV1().Jobs(ns).Get(context.Background(), names.TaskJobName(guid), metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		c := job.Spec.Template.Spec.Containers[0]
		Expect(c.Image).To(Equal(lrp.Image))
		Expect(c.Command).To(Equal([]string{"/bin/sh", "-c", command}))
		Expect(c.Command).To(Equal(lrp.Command))
		Expect(c.Resources.Limits.Memory().Equal(*lrp.Resources.Limits.Memory())).To(BeTrue(), "the process's 128Mi, got %s", c.Resources.Limits.Memory())
		Expect(c.Resources.Limits.StorageEphemeral().Value()).To(Equal(bifrost.DefaultTaskDefaults.DiskMB<<20), "CC sends no disk: task_defaults.disk_mb")

		By("giving the task the app's variables, from a Secret as the process's")
		var taskEnv map[string]string
		Eventually(func() error {
			var err error
			taskEnv, err = readSecretEnv(ns, c)
			return err
		}).Should(Succeed())
		Expect(taskEnv).To(HaveKeyWithValue("VCAP_SERVICES", env["VCAP_SERVICES"]))
		Expect(taskEnv).To(HaveKeyWithValue("spring.profiles.active", env["spring.profiles.active"]))
		Expect(taskEnv).To(HaveKeyWithValue("MEMORY_LIMIT", "128m"))
		Expect(secretEnv(ns, lrp)).To(HaveKeyWithValue("VCAP_SERVICES", taskEnv["VCAP_SERVICES"]))

		By("running it, as CC's task sync reads it")
		Eventually(func() string {
			status, body := o.call(http.MethodGet, "/tasks/"+guid, "")
			Expect(status).To(Equal(http.StatusOK), body)
			var task map[string]any
			Expect(json.Unmarshal([]byte(body), &task)).To(Succeed())
			return task["state"].(string)
		}).Should(Equal("RUNNING"))
	})
})

// secretEnv are the container's variables that come from Secrets, by name, with their values.
func secretEnv(ns string, c corev1.Container) map[string]string {
	GinkgoHelper()
	out, err := readSecretEnv(ns, c)
	Expect(err).NotTo(HaveOccurred())
	return out
}

// readSecretEnv is secretEnv, with an error while a Secret is not there (yet).
func readSecretEnv(ns string, c corev1.Container) (map[string]string, error) {
	out := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
			continue
		}
		ref := e.ValueFrom.SecretKeyRef
		secret, err := kube.CoreV1().Secrets(ns).Get(context.Background(), ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read the env secret of %s: %w", e.Name, err)
		}
		value, ok := secret.Data[ref.Key]
		if !ok {
			return nil, fmt.Errorf("secret %s has no key %s", ref.Name, ref.Key)
		}
		out[e.Name] = string(value)
	}
	return out, nil
}
