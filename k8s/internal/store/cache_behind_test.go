package store_test

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// watchGate holds back the events of every watch of a fake clientset while closed, as a watch
// does that the API server stopped serving, and delivers them, in order, once opened.
type watchGate struct {
	mu   sync.Mutex
	open chan struct{} // closed while events pass
}

func newWatchGate() *watchGate {
	g := &watchGate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *watchGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

func (g *watchGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *watchGate) passing() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

// install makes every later watch of client pass through g.
func (g *watchGate) install(client *fake.Clientset) {
	client.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		inner, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		out := make(chan watch.Event)
		stop := make(chan struct{})
		go func() {
			defer close(out)
			for ev := range inner.ResultChan() {
				select {
				case <-g.passing():
				case <-stop:
					return
				}
				select {
				case out <- ev:
				case <-stop:
					return
				}
			}
		}()
		return true, &gatedWatch{inner: inner, out: out, stop: stop}, nil
	})
}

type gatedWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func (w *gatedWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *gatedWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.inner.Stop()
	})
}

var _ = Describe("A write that opi's cache has not seen within the read wait", func() {
	var (
		ctx     context.Context
		client  *fake.Clientset
		gate    *watchGate
		backend *k8s.Backend
		lrp     *opi.LRP
	)

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		gate = newWatchGate()
		gate.install(client)
		backend = backendtest.StartBackend(client)
		lrp = backendtest.SampleLRP()
		DeferCleanup(gate.release) // the informers' watches end with the spec
	})

	// expectCacheBehind checks the answer of a write made while the cache does not follow.
	expectCacheBehind := func(err error) {
		GinkgoHelper()
		Expect(err).To(MatchError(opi.ErrUnavailable))
		Expect(err).To(MatchError(ContainSubstring("cache has not seen it")))
		Expect(err).To(MatchError(ContainSubstring("retry")))
	}

	listed := func() []string {
		lrps, err := backend.ListLRPs(ctx)
		Expect(err).NotTo(HaveOccurred())
		var out []string
		for _, l := range lrps {
			out = append(out, l.ProcessGUID())
		}
		return out
	}

	It("a desire answers 503 and keeps what it wrote; repeated once the cache follows, it succeeds and is listed", func() {
		gate.hold()
		expectCacheBehind(backend.DesireLRP(ctx, lrp))
		name := names.DeploymentName(lrp)
		Expect(backendtest.GetDeployment(client, name)).NotTo(BeNil())
		Expect(client.CoreV1().Secrets(backendtest.Namespace).Get(ctx, name+"-env", metav1.GetOptions{})).NotTo(BeNil())
		Expect(listed()).To(BeEmpty())

		gate.release()
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		Expect(listed()).To(ConsistOf(lrp.ProcessGUID()))
	})

	It("an update answers 503 and keeps its patch; repeated once the cache follows, it succeeds and is read back", func() {
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		gate.hold()
		update := opi.LRPUpdate{Instances: ptr.To[int32](5)}
		expectCacheBehind(backend.UpdateLRP(ctx, lrp.LRPIdentifier, update))
		Expect(backendtest.GetDeployment(client, names.DeploymentName(lrp)).Spec.Replicas).To(HaveValue(BeEquivalentTo(5)))

		gate.release()
		Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, update)).To(Succeed())
		got, err := backend.GetLRP(ctx, lrp.LRPIdentifier)
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Instances).To(BeEquivalentTo(5))
	})

	It("a stop answers 503 with the workload deleted; repeated once the cache follows, it succeeds and the LRP is gone", func() {
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		gate.hold()
		expectCacheBehind(backend.StopLRP(ctx, lrp.LRPIdentifier))
		deployments, err := client.AppsV1().Deployments(backendtest.Namespace).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(deployments.Items).To(BeEmpty())

		gate.release()
		Expect(backend.StopLRP(ctx, lrp.LRPIdentifier)).To(Succeed())
		Expect(listed()).To(BeEmpty())
	})

	It("a desire whose workload a stop deleted meanwhile succeeds: it took effect and was overtaken", func() {
		gate.hold()
		name := names.DeploymentName(lrp)
		go func() {
			defer GinkgoRecover()
			Eventually(func() error {
				return client.AppsV1().Deployments(backendtest.Namespace).Delete(ctx, name, metav1.DeleteOptions{})
			}).Should(Succeed())
		}()
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
	})

	It("a stop waits for the workload it deleted only: a namesake desired meanwhile does not hold it", func() {
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		// The delete is followed by a desire of the same name, and the cache sees the two as
		// one change (as when its reflector re-lists): the workload it holds is a namesake.
		deployments := appsv1.SchemeGroupVersion.WithResource("deployments")
		client.PrependReactor("delete", "deployments", func(action k8stesting.Action) (bool, runtime.Object, error) {
			obj, err := client.Tracker().Get(deployments, backendtest.Namespace, action.(k8stesting.DeleteAction).GetName())
			if err != nil {
				return true, nil, err
			}
			namesake := obj.(*appsv1.Deployment).DeepCopy()
			namesake.UID = "namesake"
			namesake.ResourceVersion = "99999"
			return true, nil, client.Tracker().Update(deployments, namesake, backendtest.Namespace)
		})
		Expect(backend.StopLRP(ctx, lrp.LRPIdentifier)).To(Succeed())
		Expect(backendtest.GetDeployment(client, names.DeploymentName(lrp)).UID).To(BeEquivalentTo("namesake"))
	})

	It("a stop of an instance answers 503 with its pod deleted; once the cache follows, the instance is gone", func() {
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		backendtest.CreatePod(client, backendtest.NewPod(lrp, "pod-a", time.Now(), corev1.PodStatus{Phase: corev1.PodRunning}))
		Eventually(func() int { return backend.CachedPodCount(lrp.LRPIdentifier) }).Should(Equal(1))
		gate.hold()
		expectCacheBehind(backend.StopInstance(ctx, lrp.LRPIdentifier, 0))
		_, err := client.CoreV1().Pods(backendtest.Namespace).Get(ctx, "pod-a", metav1.GetOptions{})
		Expect(err).To(HaveOccurred())

		gate.release()
		Eventually(func() int { return backend.CachedPodCount(lrp.LRPIdentifier) }).Should(Equal(0))
	})

	It("a task desire and a cancel answer 503 and keep what they wrote; repeated once the cache follows, they succeed", func() {
		task := backendtest.SampleTask()
		task.PrivateRegistry = nil
		gate.hold()
		expectCacheBehind(backend.DesireTask(ctx, task))
		jobs, err := client.BatchV1().Jobs(backendtest.Namespace).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(jobs.Items).To(HaveLen(1))
		_, err = backend.GetTask(ctx, task.GUID)
		Expect(err).To(MatchError(opi.ErrNotFound))

		gate.release()
		Expect(backend.DesireTask(ctx, task)).To(Succeed())
		Expect(backend.GetTask(ctx, task.GUID)).NotTo(BeNil())

		gate.hold()
		expectCacheBehind(backend.CancelTask(ctx, task.GUID))
		gate.release()
		Expect(backend.CancelTask(ctx, task.GUID)).To(Succeed())
	})
})
