package janitor_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/janitor"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/internal/workload"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
	"github.com/opi-bridge/opi/testsupport/fakekube"
)

// leftoverPassword is the credential in a leftover env Secret's VCAP_SERVICES.
const leftoverPassword = "pX7#qL2v9Rm-wq4Tz"

var _ = Describe("The janitor", func() {
	var (
		ctx     context.Context
		client  *fake.Clientset
		md      *metadatafake.FakeMetadataClient
		backend *k8s.Backend
		logger  *lagertest.TestLogger
		lrp     *opi.LRP
		name    string
	)

	lrpLabels := func(l *opi.LRP) map[string]string {
		return map[string]string{
			"opi-bridge.io/guid": l.GUID, "opi-bridge.io/version": l.Version,
			"opi-bridge.io/source-type": "APP", "app.kubernetes.io/managed-by": "opi",
		}
	}
	// leftover is what opi killed after step 1 (or 5) of a desire leaves: objects of the LRP
	// that nothing owns, created age ago.
	leftoverSecret := func(l *opi.LRP, age time.Duration) *corev1.Secret {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: names.DeploymentName(l) + "-env", Namespace: backendtest.Namespace, Labels: lrpLabels(l),
				CreationTimestamp: metav1.NewTime(time.Now().Add(-age)),
			},
			// A value that looks like what it stands for (a service binding's password), so
			// that a leak spec fails should it reach the log.
			Data: map[string][]byte{"VCAP_SERVICES": []byte(`{"db":[{"credentials":{"password":"` + leftoverPassword + `"}}]}`)},
		}
		created, err := client.CoreV1().Secrets(backendtest.Namespace).Create(ctx, s, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		return created
	}
	leftoverService := func(l *opi.LRP, age time.Duration) {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{
			Name: names.DeploymentName(l), Namespace: backendtest.Namespace, Labels: lrpLabels(l),
			CreationTimestamp: metav1.NewTime(time.Now().Add(-age)),
		}}
		_, err := client.CoreV1().Services(backendtest.Namespace).Create(ctx, s, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	secretExists := func(name string) bool {
		_, err := client.CoreV1().Secrets(backendtest.Namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil
	}
	serviceExists := func(name string) bool {
		_, err := client.CoreV1().Services(backendtest.Namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil
	}
	start := func(opts k8s.Options) *k8s.Backend {
		startCtx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		opts.Namespace = backendtest.Namespace
		opts.Store.ReadWaitTimeout = 2 * time.Second
		if opts.Clients.Metadata == nil {
			opts.Clients.Metadata = md
		}
		b := backendtest.MustBackend(client, logger, opts)
		Expect(b.Start(startCtx)).To(Succeed())
		return b
	}

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		md = backendtest.NewMetadataClient(client)
		logger = lagertest.NewTestLogger("k8s")
		lrp = backendtest.SampleLRP()
		name = names.DeploymentName(lrp)
	})

	Describe("Sweep", func() {
		BeforeEach(func() {
			backend = start(k8s.Options{Janitor: janitor.Options{Grace: time.Minute}})
		})

		It("deletes the unowned Secret and Service of an LRP that has no Deployment, once older than the grace", func() {
			leftoverSecret(lrp, 2*time.Minute)
			leftoverService(lrp, 2*time.Minute)
			backend.Sweep(ctx)
			Expect(secretExists(name + "-env")).To(BeFalse())
			Expect(serviceExists(name)).To(BeFalse())
			Expect(logger.Buffer()).To(gbytes.Say("deleted-leftover-secret"))
			Expect(string(logger.Buffer().Contents())).To(ContainSubstring(name + "-env"))
			Expect(string(logger.Buffer().Contents())).NotTo(ContainSubstring(leftoverPassword))
		})

		It("deletes only the object it looked at, not a namesake made since", func() {
			leftoverSecret(lrp, 2*time.Minute)
			var deletes []k8stesting.DeleteAction
			client.PrependReactor("delete", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
				deletes = append(deletes, a.(k8stesting.DeleteAction))
				return false, nil, nil
			})
			backend.Sweep(ctx)
			Expect(deletes).To(HaveLen(1))
			Expect(deletes[0].GetDeleteOptions().Preconditions).NotTo(BeNil())
			Expect(deletes[0].GetDeleteOptions().Preconditions.UID).NotTo(BeNil())
		})

		It("keeps a leftover within the grace: a desire may be creating it right now", func() {
			leftoverSecret(lrp, 10*time.Second)
			leftoverService(lrp, 10*time.Second)
			backend.Sweep(ctx)
			Expect(secretExists(name + "-env")).To(BeTrue())
			Expect(serviceExists(name)).To(BeTrue())
		})

		It("leaves the objects of desired LRPs alone", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			backend.Sweep(ctx)
			Expect(secretExists(name + "-env")).To(BeTrue())
			Expect(serviceExists(name)).To(BeTrue())
			deployments, secrets, services := backendtest.CountObjects(client)
			Expect([]int{deployments, secrets, services}).To(Equal([]int{1, 1, 1}))
		})

		It("leaves objects that are not opi's alone", func() {
			other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses", Namespace: backendtest.Namespace,
				Labels: map[string]string{"opi-bridge.io/guid": "g", "opi-bridge.io/version": "v"}}}
			_, err := client.CoreV1().Secrets(backendtest.Namespace).Create(ctx, other, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			backend.Sweep(ctx)
			Expect(secretExists("someone-elses")).To(BeTrue())
		})

		It("leaves the unowned Secret of a running LRP older than the grace as a desire made it, with no write", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			secret := backendtest.GetSecret(client, name+"-env")
			Expect(secret.OwnerReferences).To(BeEmpty())
			secret.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
			_, err := client.CoreV1().Secrets(backendtest.Namespace).Update(ctx, secret, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
			before := len(client.Actions())

			backend.Sweep(ctx)
			Expect(backendtest.GetSecret(client, name+"-env").UID).To(Equal(secret.UID))
			for _, a := range client.Actions()[before:] {
				Expect(a.GetVerb()).To(BeElementOf("list", "watch", "get"))
			}
		})

		It("deletes the Secret of a Deployment deleted without a stop (kubectl), once older than the grace", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			secret := backendtest.GetSecret(client, name+"-env")
			secret.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
			_, err := client.CoreV1().Secrets(backendtest.Namespace).Update(ctx, secret, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(client.AppsV1().Deployments(backendtest.Namespace).Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
			Eventually(func() error { _, err := backend.GetLRP(ctx, lrp.LRPIdentifier); return err }).Should(MatchError(opi.ErrNotFound))

			backend.Sweep(ctx)
			Expect(secretExists(name + "-env")).To(BeFalse())
		})

		It("leaves a young unowned Secret of a running LRP, with no write and no liveness check", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			secret := backendtest.GetSecret(client, name+"-env")
			secret.OwnerReferences = nil
			secret.CreationTimestamp = metav1.Now()
			_, err := client.CoreV1().Secrets(backendtest.Namespace).Update(ctx, secret, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
			before := len(client.Actions())

			backend.Sweep(ctx)
			Expect(backendtest.GetSecret(client, name+"-env").OwnerReferences).To(BeEmpty())
			for _, a := range client.Actions()[before:] {
				Expect(a.GetVerb()).To(BeElementOf("list", "watch", "get"))
				Expect(a.GetResource().Resource).NotTo(Equal("deployments"), "no liveness check either")
			}
		})

		It("creates the missing Service of a Deployment older than the grace, owned by it", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			want := backendtest.GetService(client, name)
			Expect(client.CoreV1().Services(backendtest.Namespace).Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())

			backend.Sweep(ctx)
			got := backendtest.GetService(client, name)
			Expect(got.Spec).To(Equal(want.Spec))
			Expect(got.Labels).To(Equal(want.Labels))
			Expect(metav1.IsControlledBy(got, backendtest.GetDeployment(client, name))).To(BeTrue())
			Expect(string(logger.Buffer().Contents())).To(ContainSubstring(`"hook":"service"`))
		})

		It("leaves a young Deployment's Service to the desire making it", func() {
			young := backendtest.SampleLRP()
			young.Version = "young"
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
				Name: names.DeploymentName(young), Namespace: backendtest.Namespace, Labels: lrpLabels(young),
				CreationTimestamp: metav1.Now(),
			}}
			_, err := client.AppsV1().Deployments(backendtest.Namespace).Create(ctx, d, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			Eventually(func() error { _, err := backend.GetLRP(ctx, young.LRPIdentifier); return err }).Should(Succeed())
			before := len(client.Actions())
			backend.Sweep(ctx)
			Expect(backendtest.ActionsSince(client, before)).To(BeEmpty())
			Expect(backendtest.MetadataActions(md)).To(Equal([]string{"list secrets", "list services"}))
		})

		It("asks the API server before calling an LRP gone that its cache does not have", func() {
			leftoverSecret(lrp, 2*time.Minute)
			before := len(client.Actions())
			backend.Sweep(ctx)
			Expect(backendtest.ActionsSince(client, before)).To(Equal([]string{
				"list deployments",
				"delete secrets " + name + "-env",
			}))
			Expect(backendtest.MetadataActions(md)).To(Equal([]string{"list secrets", "list services"}))
		})

		It("lists metadata only: the typed clientset lists none of what the sweep looks at", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			// Older than the grace, so that the hooks look for their objects too.
			d := backendtest.GetDeployment(client, name)
			d.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
			d, err := client.AppsV1().Deployments(backendtest.Namespace).Update(ctx, d, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
			Eventually(func() string { return backend.CachedWorkloadVersion(lrp.LRPIdentifier) }).Should(Equal(d.ResourceVersion))
			before := len(client.Actions())

			backend.Sweep(ctx)
			Expect(backendtest.ActionsSince(client, before)).To(BeEmpty())
			Expect(backendtest.MetadataActions(md)).To(Equal([]string{
				"list secrets", "list services", // the sweep's own
				"list services", "list poddisruptionbudgets", // the hooks' (service, disruption budget)
			}))
			deployments, secrets, services := backendtest.CountObjects(client)
			Expect([]int{deployments, secrets, services}).To(Equal([]int{1, 1, 1}), "complete: nothing changed")
		})

		It("tries again next time when the API server cannot be reached", func() {
			leftoverSecret(lrp, 2*time.Minute)
			var down atomic.Bool
			down.Store(true)
			var fired atomic.Int32
			md.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
				if down.Load() {
					fired.Add(1)
					return true, nil, backendtest.ConnectionRefused
				}
				return false, nil, nil
			})
			backend.Sweep(ctx)
			Expect(fired.Load()).To(BeNumerically(">=", 1), "the fault hook fired")
			Expect(secretExists(name + "-env")).To(BeTrue())
			down.Store(false)
			backend.Sweep(ctx)
			Expect(secretExists(name + "-env")).To(BeFalse())
		})
	})

	It("asks the API server for metadata only, and works from it", func() {
		secret := leftoverSecret(lrp, 2*time.Minute)
		type request struct{ path, accept, selector, limit string }
		var (
			mu       sync.Mutex
			requests []request
		)
		server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			requests = append(requests, request{
				path: r.Method + " " + r.URL.Path, accept: r.Header.Get("Accept"),
				selector: r.URL.Query().Get("labelSelector"), limit: r.URL.Query().Get("limit"),
			})
			mu.Unlock()
			list := metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"}}
			if r.URL.Path == "/api/v1/namespaces/"+backendtest.Namespace+"/secrets" {
				list.Items = []metav1.PartialObjectMetadata{{
					TypeMeta:   metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
					ObjectMeta: secret.ObjectMeta,
				}}
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(list)
		}))
		DeferCleanup(server.Close)
		wire, err := metadata.NewForConfig(&rest.Config{Host: server.URL})
		Expect(err).NotTo(HaveOccurred())
		b := start(k8s.Options{Janitor: janitor.Options{Grace: time.Minute}, Clients: k8s.Clients{Metadata: wire}})

		b.Sweep(ctx)
		Expect(secretExists(name+"-env")).To(BeFalse(), "the leftover found from its metadata is deleted")
		mu.Lock()
		defer mu.Unlock()
		var paths []string
		for _, r := range requests {
			paths = append(paths, r.path)
			Expect(r.accept).To(HavePrefix("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"))
			Expect(r.selector).To(Equal("opi-bridge.io/source-type=APP"))
			Expect(r.limit).To(Equal("500"))
		}
		Expect(paths).To(Equal([]string{
			"GET /api/v1/namespaces/" + backendtest.Namespace + "/secrets",
			"GET /api/v1/namespaces/" + backendtest.Namespace + "/services",
		}))
		for _, a := range client.Actions() {
			Expect(fakekube.Describe(a)).NotTo(Equal("list secrets"), "no Secret is listed whole")
		}
	})

	It("without a metadata client, lists with the clientset to the same outcome", func() {
		leftoverSecret(lrp, 2*time.Minute)
		leftoverService(lrp, 2*time.Minute)
		startCtx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		b := backendtest.MustBackend(client, logger, k8s.Options{Namespace: backendtest.Namespace, Store: store.Options{ReadWaitTimeout: 2 * time.Second}, Janitor: janitor.Options{Grace: time.Minute}})
		Expect(b.Start(startCtx)).To(Succeed())
		before := len(client.Actions())

		b.Sweep(ctx)
		Expect(backendtest.ActionsSince(client, before)).To(Equal([]string{
			"list secrets", "list deployments", "delete secrets " + name + "-env",
			"list services", "list deployments", "delete services " + name,
		}))
		Expect(secretExists(name + "-env")).To(BeFalse())
		Expect(serviceExists(name)).To(BeFalse())
	})

	Describe("Sweep with StatefulSets", func() {
		BeforeEach(func() {
			backend = start(k8s.Options{Workload: workload.StatefulSets, Janitor: janitor.Options{Grace: time.Minute}})
		})

		It("leaves the unowned Secret of a StatefulSet and makes a missing Service, owned by it", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			secret := backendtest.GetSecret(client, name+"-env")
			secret.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
			_, err := client.CoreV1().Secrets(backendtest.Namespace).Update(ctx, secret, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(client.CoreV1().Services(backendtest.Namespace).Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
			// The service check needs the StatefulSet older than the grace.
			set := backendtest.GetStatefulSet(client, name)
			set.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
			_, err = client.AppsV1().StatefulSets(backendtest.Namespace).Update(ctx, set, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
			// Sweep until the cache has seen the older StatefulSet (each sweep is idempotent).
			Eventually(func() bool {
				backend.Sweep(ctx)
				return serviceExists(name)
			}).Should(BeTrue())

			set = backendtest.GetStatefulSet(client, name)
			Expect(backendtest.GetSecret(client, name+"-env").OwnerReferences).To(BeEmpty())
			Expect(metav1.IsControlledBy(backendtest.GetService(client, name), set)).To(BeTrue())
			Expect(backendtest.GetService(client, name).OwnerReferences[0].Kind).To(Equal("StatefulSet"))
		})
	})

	It("sweeps every period while it runs as leader work, and not once that stops", func() {
		leftoverSecret(lrp, time.Hour)
		b := start(k8s.Options{Janitor: janitor.Options{Period: 50 * time.Millisecond, Grace: time.Minute}})
		Consistently(func() bool { return secretExists(name + "-env") }, 200*time.Millisecond).Should(BeTrue(), "swept before the leader work ran")
		leaderCtx, stopLeading := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { b.RunLeaderWork(leaderCtx); close(done) }()
		Eventually(func() bool { return secretExists(name + "-env") }).Should(BeFalse())
		other := backendtest.SampleLRP()
		other.Version = "another-version"
		leftoverSecret(other, time.Hour)
		Eventually(func() bool { return secretExists(names.DeploymentName(other) + "-env") }).Should(BeFalse())
		stopLeading()
		Eventually(done).Should(BeClosed())
		third := backendtest.SampleLRP()
		third.Version = "a-third-version"
		leftoverSecret(third, time.Hour)
		Consistently(func() bool { return secretExists(names.DeploymentName(third) + "-env") }, 300*time.Millisecond).Should(BeTrue())
	})

	It("does not run without a period", func() {
		leftoverSecret(lrp, time.Hour)
		b := start(k8s.Options{})
		leaderCtx, stopLeading := context.WithCancel(context.Background())
		DeferCleanup(stopLeading)
		go b.RunLeaderWork(leaderCtx)
		Consistently(func() bool { return secretExists(name + "-env") }, 300*time.Millisecond).Should(BeTrue())
	})

	Describe("and a desire racing it (or a stop)", func() {
		It("recreate the env Secret when it vanished between the desire's create and its read", func() {
			backend = start(k8s.Options{})
			// An unowned Secret of the LRP's (an interrupted desire's): the desire's create
			// finds it, and the desire reads it to see that no other workload owns it.
			leftoverSecret(lrp, time.Minute)
			var fired atomic.Int32
			client.PrependReactor("get", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
				// The Secret is deleted (the janitor, a stop) between the desire's create and its read.
				if a.(k8stesting.GetAction).GetName() == name+"-env" && fired.Add(1) == 1 {
					Expect(client.Tracker().Delete(a.GetResource(), backendtest.Namespace, name+"-env")).To(Succeed())
				}
				return false, nil, nil
			})
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			Expect(fired.Load()).To(BeNumerically(">=", 1), "the fault hook fired")
			Expect(metav1.IsControlledBy(backendtest.GetSecret(client, name+"-env"), backendtest.GetDeployment(client, name))).To(BeTrue())
			Expect(backendtest.GetSecret(client, name+"-env").Data).To(HaveKey("FOO"))
			Expect(string(backendtest.GetSecret(client, name+"-env").Data["VCAP_SERVICES"])).NotTo(ContainSubstring(leftoverPassword), "created again from the desire, not the leftover")
		})
	})
})
