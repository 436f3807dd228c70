package k8s_test

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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
	"github.com/opi-bridge/opi/opi"
	"github.com/opi-bridge/opi/testsupport/fakekube"
)

func TestK8s(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "K8s Backend Suite")
}

var _ = BeforeSuite(func() {
	// client-go's reflectors log through klog; keep that in the spec output, not on stderr.
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	Expect(flags.Set("logtostderr", "false")).To(Succeed())
	Expect(flags.Set("stderrthreshold", "FATAL")).To(Succeed())
	klog.SetOutput(GinkgoWriter)
})

const namespace = "cf-apps"

// newClient is a fake clientset that writes as an API server does (package fakekube).
func newClient(objects ...runtime.Object) *fake.Clientset {
	return fakekube.NewClientset(objects...)
}

// newMetadataClient is a metadata client (client-go's metadata fake) whose LISTs answer what the
// fake clientsets hold, as an API server's metadata-only LIST does: each object's metadata
// alone, as PartialObjectMetadata, of the objects its label selector matches. It records its own actions: the clientsets see none of its
// LISTs, so a test tells which client listed what.
func newMetadataClient(clients ...k8stesting.FakeClient) *metadatafake.FakeMetadataClient {
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

// metadataActions describes the metadata client's actions as "verb resource".
func metadataActions(md *metadatafake.FakeMetadataClient) []string {
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

// startBackend starts a backend on client and returns once its informers list and watch, so
// that every later action of client is the backend's or the test's own.
func startBackend(client *fake.Clientset) *k8s.Backend {
	return startBackendWith(client, k8s.Options{})
}

// startBackendWith is startBackend with opts (namespace and read wait filled in, and a
// metadata client over client's objects unless opts has one).
func startBackendWith(client *fake.Clientset, opts k8s.Options) *k8s.Backend {
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	opts.Namespace = namespace
	opts.Store.ReadWaitTimeout = 2 * time.Second
	if opts.Clients.Metadata == nil {
		clients := []k8stesting.FakeClient{client}
		if gw, ok := opts.Clients.Gateway.(k8stesting.FakeClient); ok {
			clients = append(clients, gw)
		}
		opts.Clients.Metadata = newMetadataClient(clients...)
	}
	backend := mustBackend(client, lagertest.NewTestLogger("k8s"), opts)
	Expect(backend.Start(ctx)).To(Succeed())
	Eventually(func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "watch" {
				n++
			}
		}
		return n
	}).Should(Equal(3)) // deployments, pods, jobs
	return backend
}

// actionsSince describes the client's actions from index from on, as "verb resource name"
// (name left out for lists), watches excluded.
func actionsSince(client *fake.Clientset, from int) []string {
	return fakekube.ActionsSince(client, from, "watch")
}

// sampleLRP is an LRP with every field set.
func sampleLRP() *opi.LRP {
	return &opi.LRP{
		LRPIdentifier: opi.LRPIdentifier{
			GUID:    "8a3d6a87-0d35-4ad7-a6d3-2c0ef0d3bb2a",
			Version: "f4a19c5e-8b8e-4c1c-9d4b-6a3a2b1c0d9e",
		},
		ProcessType:      "web",
		AppGUID:          "6c8a4d7e-1111-2222-3333-444455556666",
		AppName:          "My App",
		SpaceGUID:        "space-guid-1",
		SpaceName:        "dev",
		OrganizationGUID: "org-guid-1",
		OrganizationName: "acme",
		Image:            "busybox:1.36",
		Command:          []string{"/bin/sh", "-c", "echo $PORT $(date); sleep 1d"},
		Env: map[string]string{
			"FOO":                    "foo-value",
			"VCAP_SERVICES":          `{"db":[{"credentials":{"password":"s3cr3t-pw"}}]}`,
			"spring.profiles.active": "cloud-value",
			"a:b":                    "colon-value",
			"x.y":                    "reserved-prefix-value",
			"CF_INSTANCE_PORT":       "user-instance-port",
		},
		Ports: []int32{8080, 9090},
		Health: opi.HealthCheck{
			Type:           opi.HealthCheckHTTP,
			Endpoint:       "/health",
			TimeoutMs:      2500,
			StartTimeoutMs: 90000,
		},
		MemoryMB:               256,
		DiskMB:                 1024,
		CPUWeight:              25,
		Instances:              2,
		Routes:                 []opi.Route{{Hostname: "app.example.com", Port: 8080}},
		LastUpdated:            "1600000000.2499998",
		UserDefinedAnnotations: map[string]string{"example.com/team": "blue"},
	}
}

// Object getters that fail the test when the object is missing.

func getDeployment(client *fake.Clientset, name string) *appsv1.Deployment {
	d, err := client.AppsV1().Deployments(namespace).Get(context.Background(), name, metav1.GetOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return d
}

func getSecret(client *fake.Clientset, name string) *corev1.Secret {
	s, err := client.CoreV1().Secrets(namespace).Get(context.Background(), name, metav1.GetOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return s
}

func getService(client *fake.Clientset, name string) *corev1.Service {
	s, err := client.CoreV1().Services(namespace).Get(context.Background(), name, metav1.GetOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return s
}

func countObjects(client *fake.Clientset) (deployments, secrets, services int) {
	ctx := context.Background()
	d, err := client.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	s, err := client.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	v, err := client.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return len(d.Items), len(s.Items), len(v.Items)
}

// step is the calls one step of a desire's second round makes, in their order.
type step []string

// expectDesireCalls asserts the calls of a desire: the workload create alone (round 1), then
// round 2's steps, run at once (each step's calls in order, the steps' calls interleaved any
// way), then after, in order (what a refusal undoes).
func expectDesireCalls(actions []string, workload string, round2 []step, after ...string) {
	GinkgoHelper()
	Expect(len(actions)).To(BeNumerically(">=", 1+len(after)), "calls: %v", actions)
	Expect(actions[0]).To(Equal(workload), "round 1 is the workload create alone: %v", actions)
	rest := actions[1 : len(actions)-len(after)]
	Expect(actions[len(actions)-len(after):]).To(Equal(append([]string{}, after...)), "after round 2: %v", actions)
	var all []string
	for _, s := range round2 {
		all = append(all, s...)
	}
	Expect(rest).To(ConsistOf(all), "round 2: %v", actions)
	for _, s := range round2 {
		Expect(isSubsequence(s, rest)).To(BeTrue(), "round 2 makes %v in this order: %v", s, rest)
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

// mustBackend is k8s.NewBackend for options a spec knows to be good: a refusal fails the spec
// (or the benchmark) at once.
func mustBackend(client kubernetes.Interface, logger lager.Logger, opts k8s.Options) *k8s.Backend {
	b, err := k8s.NewBackend(client, logger, opts)
	if err != nil {
		panic(fmt.Sprintf("new backend: %v", err))
	}
	return b
}
