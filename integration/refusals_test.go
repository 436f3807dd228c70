package integration_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/testsupport/fixture"
)

// objectVersions is every object of every kind opi writes, or makes Kubernetes write for it, in
// namespace ns, by kind and name, with its resourceVersion. Equal states mean nothing was
// created, changed or deleted.
func objectVersions(ns string) map[string]string {
	ctx := context.Background()
	all := metav1.ListOptions{}
	state := map[string]string{}
	add := func(kind string, items []metav1.Object) {
		for _, o := range items {
			state[kind+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	secrets, err := kube.CoreV1().Secrets(ns).List(ctx, all)
	Expect(err).NotTo(HaveOccurred())
	add("secret", metas(secrets.Items))
	services, err := kube.CoreV1().Services(ns).List(ctx, all)
	Expect(err).NotTo(HaveOccurred())
	add("service", metas(services.Items))
	pods, err := kube.CoreV1().Pods(ns).List(ctx, all)
	Expect(err).NotTo(HaveOccurred())
	add("pod", metas(pods.Items))
	deployments, err := kube.AppsV1().Deployments(ns).List(ctx, all)
	Expect(err).NotTo(HaveOccurred())
	add("deployment", metas(deployments.Items))
	replicaSets, err := kube.AppsV1().ReplicaSets(ns).List(ctx, all)
	Expect(err).NotTo(HaveOccurred())
	add("replicaset", metas(replicaSets.Items))
	statefulSets, err := kube.AppsV1().StatefulSets(ns).List(ctx, all)
	Expect(err).NotTo(HaveOccurred())
	add("statefulset", metas(statefulSets.Items))
	revisions, err := kube.AppsV1().ControllerRevisions(ns).List(ctx, all)
	Expect(err).NotTo(HaveOccurred())
	add("controllerrevision", metas(revisions.Items))
	slices, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, all)
	Expect(err).NotTo(HaveOccurred())
	add("endpointslice", metas(slices.Items))
	pdbs, err := kube.PolicyV1().PodDisruptionBudgets(ns).List(ctx, all)
	Expect(err).NotTo(HaveOccurred())
	add("poddisruptionbudget", metas(pdbs.Items))
	configMaps, err := kube.CoreV1().ConfigMaps(ns).List(ctx, all)
	Expect(err).NotTo(HaveOccurred())
	add("configmap", metas(configMaps.Items))
	return state
}

func metas[T any, PT interface {
	*T
	metav1.Object
}](items []T) []metav1.Object {
	out := make([]metav1.Object, 0, len(items))
	for i := range items {
		out = append(out, PT(&items[i]))
	}
	return out
}

// settledState waits until the namespace stops changing (controllers and kwok are done with
// the running app) and returns its state.
func settledState(ns string) map[string]string {
	var last map[string]string
	Eventually(func() bool {
		previous := last
		last = objectVersions(ns)
		return previous != nil && equalStates(previous, last)
	}, 60*time.Second, time.Second).Should(BeTrue(), "the namespace kept changing")
	return last
}

func equalStates(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// errorMessage is the message of the contract's error body.
func errorMessage(body string) string {
	var e models.ErrorResponse
	ExpectWithOffset(1, json.Unmarshal([]byte(body), &e)).To(Succeed(), body)
	return e.Error.Message
}

var _ = Describe("Refused before the first write", Ordered, func() {
	var (
		o    *opiServer
		ns   string
		live *app
	)

	BeforeAll(func() {
		ns = newNamespace()
		o = startOpi(ns)
		live = newApp()
		desire(o, live)
		Eventually(allRunning(o, live)).Should(Equal([]string{"RUNNING", "RUNNING"}))
		// The workload's controller writes its status once more when the instances have been
		// Ready for the minimum ready time (10 s); the states compared below start after that.
		Eventually(func() int32 {
			w := workloads(ns, live)
			if len(w) == 0 {
				return -1
			}
			return w[0].Status.AvailableReplicas
		}, 60*time.Second).Should(BeEquivalentTo(2))
		// The leader routes its two instances (the route's Ingress, Service and EndpointSlices)
		// after the desire: the states compared below start after that too.
		Eventually(func() []string { return routeEndpoints(ns, "ingresses", "dora.example.com", "/") }).Should(HaveLen(2))
	})

	It("learnt the cluster's env-name rule at start-up and logged it", func() {
		Expect(o.Logs()).To(ContainSubstring(`"env-names":"relaxed"`))
		Expect(o.Logs()).To(ContainSubstring(`"env-names-probed":true`))
	})

	// desireWith is a desire of a new app, changed by mutate.
	desireWith := func(mutate func(a *app)) (string, string) {
		a := newApp()
		a.extra = map[string]any{}
		mutate(a)
		return "/apps/" + a.processGUID(), a.body()
	}
	updateWith := func(update map[string]any) (string, string) {
		return "/apps/" + live.processGUID(), fixture.UpdateLRP(live.guid, live.version, update).JSON()
	}

	DescribeTable("answers 400 naming the field and the rule, and Kubernetes holds exactly what it held",
		func(method string, request func() (string, string), message string) {
			before := settledState(ns)
			path, body := request()
			status, answer := o.call(method, path, body)
			Expect(status).To(Equal(http.StatusBadRequest), answer)
			Expect(errorMessage(answer)).To(ContainSubstring(message))
			Expect(objectVersions(ns)).To(Equal(before))
			Consistently(func() map[string]string { return objectVersions(ns) }, 2*time.Second, 500*time.Millisecond).Should(Equal(before))
		},
		Entry("an annotation key Kubernetes refuses", "PUT", func() (string, string) {
			return desireWith(func(a *app) { a.extra["user_defined_annotations"] = map[string]string{"bad key!": "v"} })
		}, `user_defined_annotations has a key "bad key!" that is not a Kubernetes annotation key`),
		Entry("annotations over 256 KiB", "PUT", func() (string, string) {
			return desireWith(func(a *app) {
				a.extra["user_defined_annotations"] = map[string]string{"big": strings.Repeat("x", 256<<10)}
			})
		}, "user_defined_annotations are larger than the 262144 bytes"),
		Entry("opi's own annotation as a user annotation (it would silence the app's crash reports)", "PUT", func() (string, string) {
			return desireWith(func(a *app) {
				a.extra["user_defined_annotations"] = map[string]string{"prometheus.io/scrape": "true", "opi-bridge.io/crashes-reported": "2147483647"}
			})
		}, `user_defined_annotations has a key "opi-bridge.io/crashes-reported" that opi does not pass to pods`),
		Entry("an AppArmor annotation", "PUT", func() (string, string) {
			return desireWith(func(a *app) {
				a.extra["user_defined_annotations"] = map[string]string{"container.apparmor.security.beta.kubernetes.io/opi": "unconfined"}
			})
		}, `user_defined_annotations has a key "container.apparmor.security.beta.kubernetes.io/opi" that opi does not pass to pods`),
		Entry("a guid ending in '-' (no label value)", "PUT", func() (string, string) {
			return desireWith(func(a *app) { a.guid = strings.TrimSuffix(a.guid, a.guid[len(a.guid)-1:]) + "-" })
		}, "cannot be a Kubernetes label value"),
		Entry("an environment over a Secret's 1 MiB, under the body limit", "PUT", func() (string, string) {
			return desireWith(func(a *app) { a.extra["environment"] = map[string]string{"BIG": strings.Repeat("x", 1<<20)} })
		}, "more than the 1048576 a Kubernetes Secret holds"),
		Entry("an env name Kubernetes refuses", "PUT", func() (string, string) {
			return desireWith(func(a *app) { a.extra["environment"] = map[string]string{"A=B": "x"} })
		}, `environment has a variable name "A=B"`),
		Entry("a route hostname that is no DNS name", "PUT", func() (string, string) {
			return desireWith(func(a *app) { a.extra["routes"] = fixture.Routes("not a host!", 8080) })
		}, `routes.cf-router[0].hostname "not a host!" is not a DNS name`),
		Entry("an image reference that does not parse", "PUT", func() (string, string) {
			return desireWith(func(a *app) {
				a.extra["lifecycle"] = fixture.DockerLifecycle("Not/A:Valid:Image", []string{})
			})
		}, `lifecycle.docker_lifecycle.image "Not/A:Valid:Image" is not an image reference`),
		Entry("a port twice", "PUT", func() (string, string) {
			return desireWith(func(a *app) { a.extra["ports"] = []int{8080, 8080} })
		}, "ports lists port 8080 twice"),
		Entry("an app name that makes opi's annotations too large", "PUT", func() (string, string) {
			return desireWith(func(a *app) { a.extra["app_name"] = strings.Repeat("n", 300<<10) })
		}, "would break a rule of Kubernetes: metadata.annotations: Too long"),
		Entry("an update's route hostname that is no DNS name", "POST", func() (string, string) {
			return updateWith(map[string]any{"routes": fixture.Routes("bad_host", 8080)})
		}, `update.routes.cf-router[0].hostname "bad_host" is not a DNS name`),
		Entry("an update's image that does not parse", "POST", func() (string, string) {
			return updateWith(map[string]any{"image": "team/Upper-Case"})
		}, `update.image "team/Upper-Case" is not an image reference`),
		Entry("an update's annotation too large for Kubernetes", "POST", func() (string, string) {
			return updateWith(map[string]any{"annotation": strings.Repeat("1", 300<<10)})
		}, "metadata.annotations: Too long"),
	)

	It("undoes a desire that a quota refuses halfway, and says why", func() {
		ctx := context.Background()
		// As many Services as there are (the running app's and its route's): a new app's is one
		// too many.
		services, err := kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		have := int64(len(services.Items))
		quota := &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: "no-more-services"},
			Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServices: *resource.NewQuantity(have, resource.DecimalSI)}},
		}
		_, err = kube.CoreV1().ResourceQuotas(ns).Create(ctx, quota, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = kube.CoreV1().ResourceQuotas(ns).Delete(ctx, quota.Name, metav1.DeleteOptions{}) })
		Eventually(func() bool {
			q, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, quota.Name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			used, ok := q.Status.Used[corev1.ResourceServices]
			return ok && used.Value() == have
		}).Should(BeTrue(), "the quota controller did not count the running app's services")

		before := settledState(ns)
		a := newApp()
		status, answer := o.call("PUT", "/apps/"+a.processGUID(), a.body())
		Expect(status).To(Equal(http.StatusBadRequest), answer)
		message := errorMessage(answer)
		Expect(message).To(ContainSubstring("create service: invalid: "))
		Expect(message).To(ContainSubstring("exceeded quota"))
		Expect(message).To(ContainSubstring("removed what this desire had written (" + strings.TrimSuffix(workloadResource(), "s") + " "))
		Expect(workloads(ns, a)).To(BeEmpty(), "gone before the answer")
		// The workload's controller may have made a ReplicaSet (or a ControllerRevision) and pods
		// in the moment the workload lived; the garbage collector removes them.
		Eventually(func() map[string]string { return objectVersions(ns) }).Should(Equal(before))

		status, body := o.call("GET", "/apps", "")
		Expect(status).To(Equal(http.StatusOK))
		Expect(body).NotTo(ContainSubstring(a.guid))
	})
})
