// Package backendtest is what the backend's black-box specs share: a fake API server, a
// started backend on it (through k8s.NewBackend, as cmd/opi makes it), sample LRPs, tasks and
// pods, and the getters and assertions those specs read the fake with. Only tests import it.
package backendtest

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	gatewayscheme "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/scheme"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/testsupport/fakekube"
)

// Namespace is where the specs' backends run apps.
const Namespace = "cf-apps"

// KlogToGinkgo sends client-go's klog output (the reflectors log through it) to the spec
// output instead of stderr. Call it in a suite's BeforeSuite.
func KlogToGinkgo() {
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	Expect(flags.Set("logtostderr", "false")).To(Succeed())
	Expect(flags.Set("stderrthreshold", "FATAL")).To(Succeed())
	klog.SetOutput(GinkgoWriter)
}

// ConnectionRefused is the error client-go returns when the API server does not answer.
var ConnectionRefused = &url.Error{Op: "Post", URL: "https://127.0.0.1:6443/api/v1/namespaces/cf-apps/secrets", Err: &net.OpError{
	Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED),
}}

// NewClient is a fake clientset that writes as an API server does (package fakekube).
func NewClient(objects ...runtime.Object) *fake.Clientset {
	return fakekube.NewClientset(objects...)
}

// NewMetadataClient is a metadata client (client-go's metadata fake) whose LISTs answer what the
// fake clientsets hold, as an API server's metadata-only LIST does: each object's metadata
// alone, as PartialObjectMetadata, of the objects its label selector matches. It records its own actions: the clientsets see none of its
// LISTs, so a test tells which client listed what.
func NewMetadataClient(clients ...k8stesting.FakeClient) *metadatafake.FakeMetadataClient {
	md := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	md.PrependReactor("list", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		gvk, ok := fakeKinds[action.GetResource()]
		if !ok {
			return true, nil, fmt.Errorf("no kind known for %s", action.GetResource())
		}
		for _, c := range clients {
			list, err := c.Tracker().List(action.GetResource(), gvk, action.GetNamespace())
			if runtime.IsNotRegisteredError(err) {
				continue // another clientset's kind
			}
			if err != nil {
				return true, nil, err
			}
			out := &metav1.List{}
			if m, err := meta.ListAccessor(list); err == nil {
				out.ResourceVersion = m.GetResourceVersion()
			}
			selector := labels.Everything()
			if l, ok := action.(k8stesting.ListAction); ok && l.GetListRestrictions().Labels != nil {
				selector = l.GetListRestrictions().Labels
			}
			err = meta.EachListItem(list, func(obj runtime.Object) error {
				o, ok := obj.(metav1.ObjectMetaAccessor)
				if !ok {
					return fmt.Errorf("%T has no object metadata", obj)
				}
				if !selector.Matches(labels.Set(o.GetObjectMeta().GetLabels())) {
					return nil
				}
				item := &metav1.PartialObjectMetadata{
					TypeMeta: metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind},
				}
				o.GetObjectMeta().(*metav1.ObjectMeta).DeepCopyInto(&item.ObjectMeta)
				out.Items = append(out.Items, runtime.RawExtension{Object: item})
				return nil
			})
			return true, out, err
		}
		return true, nil, fmt.Errorf("no fake clientset holds %s", action.GetResource())
	})
	return md
}

// MetadataActions describes the metadata client's actions as "verb resource".
func MetadataActions(md *metadatafake.FakeMetadataClient) []string {
	var out []string
	for _, a := range md.Actions() {
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	return out
}

// fakeKinds are the kinds of the fake clientsets' resources (kubernetes and the Gateway API).
var fakeKinds = func() map[schema.GroupVersionResource]schema.GroupVersionKind {
	kinds := map[schema.GroupVersionResource]schema.GroupVersionKind{}
	for _, s := range []*runtime.Scheme{kubescheme.Scheme, gatewayscheme.Scheme} {
		for gvk := range s.AllKnownTypes() {
			if strings.HasSuffix(gvk.Kind, "List") {
				continue
			}
			plural, _ := meta.UnsafeGuessKindToResource(gvk)
			kinds[plural] = gvk
		}
	}
	return kinds
}()

// StartBackend starts a backend on client and returns once its informers list and watch, so
// that every later action of client is the backend's or the test's own.
func StartBackend(client *fake.Clientset) *k8s.Backend {
	return StartBackendWith(client, k8s.Options{})
}

// StartBackendWith is StartBackend with opts (namespace and read wait filled in, and a
// metadata client over client's objects unless opts has one).
func StartBackendWith(client *fake.Clientset, opts k8s.Options) *k8s.Backend {
	return StartBackendThrough(client, client, opts)
}

// StartBackendThrough is StartBackendWith for a backend that reaches client through
// wrapped (a client that delays or reorders some calls, say).
func StartBackendThrough(client *fake.Clientset, wrapped kubernetes.Interface, opts k8s.Options) *k8s.Backend {
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	opts.Namespace = Namespace
	opts.Store.ReadWaitTimeout = 2 * time.Second
	if opts.Clients.Metadata == nil {
		clients := []k8stesting.FakeClient{client}
		if gw, ok := opts.Clients.Gateway.(k8stesting.FakeClient); ok {
			clients = append(clients, gw)
		}
		opts.Clients.Metadata = NewMetadataClient(clients...)
	}
	from := len(client.Actions())
	backend := MustBackend(wrapped, lagertest.NewTestLogger("k8s"), opts)
	Expect(backend.Start(ctx)).To(Succeed())
	Eventually(func() int {
		n := 0
		for _, a := range client.Actions()[from:] {
			if a.GetVerb() == "watch" {
				n++
			}
		}
		return n
	}).Should(Equal(3)) // deployments, pods, jobs
	return backend
}

// MustBackend is k8s.NewBackend for options a spec knows to be good: a refusal fails the spec
// (or the benchmark) at once.
func MustBackend(client kubernetes.Interface, logger lager.Logger, opts k8s.Options) *k8s.Backend {
	b, err := k8s.NewBackend(client, logger, opts)
	if err != nil {
		panic(fmt.Sprintf("new backend: %v", err))
	}
	return b
}

// ActionsSince describes the client's actions from index from on, as "verb resource name"
// (name left out for lists), watches excluded.
func ActionsSince(client *fake.Clientset, from int) []string {
	return fakekube.ActionsSince(client, from, "watch")
}

// Step is the calls one step of a desire's round makes, in their order.
type Step []string

// ExpectDesireCalls asserts the calls of a desire: round 1, the workload create and the
// steps beside it (its Secrets) run at once, then round 2's steps, run at once once the
// workload is known (each step's calls in order, the steps' calls interleaved any way, round
// 2's calls after the workload create), then after, in order (what a refusal undoes).
func ExpectDesireCalls(actions []string, workload string, beside, round2 []Step, after ...string) {
	GinkgoHelper()
	Expect(len(actions)).To(BeNumerically(">=", 1+len(after)), "calls: %v", actions)
	rest := actions[:len(actions)-len(after)]
	Expect(actions[len(actions)-len(after):]).To(Equal(append([]string{}, after...)), "after the rounds: %v", actions)
	all := []string{workload}
	for _, s := range append(append([]Step{}, beside...), round2...) {
		all = append(all, s...)
	}
	Expect(rest).To(ConsistOf(all), "the rounds: %v", actions)
	for _, s := range beside {
		Expect(isSubsequence(s, rest)).To(BeTrue(), "round 1 makes %v in this order: %v", s, rest)
	}
	for _, s := range round2 {
		Expect(isSubsequence(append(Step{workload}, s...), rest)).To(BeTrue(), "round 2 makes %v in this order, after the workload: %v", s, rest)
	}
}

// isSubsequence says whether want's elements appear in have in want's order.
func isSubsequence(want, have []string) bool {
	i := 0
	for _, h := range have {
		if i < len(want) && h == want[i] {
			i++
		}
	}
	return i == len(want)
}

// Lead runs run (a backend's leader work, or a service's) as the leader does, until the spec
// ends or the returned stop is called; stop waits for run to return.
func Lead(run func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			Eventually(done).Should(BeClosed())
		})
	}
	DeferCleanup(stop)
	return stop
}
