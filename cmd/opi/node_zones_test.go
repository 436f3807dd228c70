package main

import (
	"context"
	"sync"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/k8sfakes"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/metrics"
	"github.com/opi-bridge/opi/opi"
)

// kubernetes.node_zones wired as connect wires it (wireNATS, waitForNodes, the backend's leader
// work): the nodes' metadata informer feeds each registration's availability_zone, and without
// the key no node is ever listed or watched.
var _ = Describe("The node zones of routing nats", func() {
	const namespace = "cf-workloads"
	var (
		ctx context.Context
		md  *metadatafake.FakeMetadataClient
	)
	BeforeEach(func() {
		GinkgoT().Setenv("KUBECONFIG", "")
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(context.Background())
		DeferCleanup(cancel)
		node := &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
			ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{corev1.LabelTopologyZone: "z1"}},
		}
		scheme := metadatafake.NewTestScheme()
		scheme.AddKnownTypeWithName(corev1.SchemeGroupVersion.WithKind("Node"), &metav1.PartialObjectMetadata{})
		md = metadatafake.NewSimpleMetadataClient(scheme, node)
	})
	nodeActions := func() []string {
		var out []string
		for _, a := range md.Actions() {
			if a.GetResource().Resource == "nodes" {
				out = append(out, a.GetVerb())
			}
		}
		return out
	}
	wire := func(args ...string) (*k8s.Options, func() bool, *lagertest.TestLogger) {
		cfg, err := LoadConfig(append([]string{"--routing", "nats", "--nats-url", "nats://127.0.0.1:4222", "--namespace", namespace}, args...))
		Expect(err).NotTo(HaveOccurred())
		opts := cfg.backendOptions()
		logger := lagertest.NewTestLogger("opi")
		synced, err := wireNATS(ctx, cfg, md, logger, metrics.New(), &opts)
		Expect(err).NotTo(HaveOccurred())
		return &opts, synced, logger
	}

	It("on: starts the nodes' informer, and a node's zone label reaches the registration of an instance on it", func() {
		opts, synced, logger := wire("--node-zones")
		Expect(synced).NotTo(BeNil())
		Eventually(synced).Should(BeTrue())
		Expect(nodeActions()).To(ConsistOf("list", "watch"))

		// The backend as connect makes it, with a table that records instead of the emitter.
		table := new(k8sfakes.FakeRoutesTable)
		opts.Clients.Routes = table
		client := fake.NewClientset()
		backend, err := k8s.NewBackend(client, logger, *opts)
		Expect(err).NotTo(HaveOccurred())
		Expect(backend.Start(ctx)).To(Succeed())
		lrp := &opi.LRP{
			LRPIdentifier: opi.LRPIdentifier{GUID: "8a3d6a87-0d35-4ad7-a6d3-2c0ef0d3bb2a", Version: "f4a19c5e-8b8e-4c1c-9d4b-6a3a2b1c0d9e"},
			ProcessType:   "web", AppGUID: "6c8a4d7e-1111-2222-3333-444455556666", AppName: "app",
			SpaceGUID: "space-1", SpaceName: "dev", OrganizationGUID: "org-1", OrganizationName: "acme",
			Image: "busybox:1.36", Ports: []int32{8080}, MemoryMB: 256, DiskMB: 1024, CPUWeight: 25, Instances: 1,
			Routes: []opi.Route{{Hostname: "app.example.com", Port: 8080}}, LastUpdated: "1600000000.0",
		}
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		ready := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
		_, err = client.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "pod-a", Namespace: namespace, UID: "pod-uid-a", CreationTimestamp: ready, Labels: map[string]string{
				names.LabelGUID: lrp.GUID, names.LabelVersion: lrp.Version, names.LabelSourceType: names.SourceTypeApp,
			}},
			Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "opi", Image: lrp.Image}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.1.2.3", Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: ready},
			}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		leaderCtx, stop := context.WithCancel(ctx)
		var done sync.WaitGroup
		done.Go(func() {
			waitForNodes(leaderCtx, synced, logger)
			backend.RunLeaderWork(leaderCtx)
		})
		DeferCleanup(func() { stop(); done.Wait() })
		Eventually(table.SetCallCount).Should(BeNumerically(">=", 1))
		_, reg, _ := table.SetArgsForCall(table.SetCallCount() - 1)
		Expect(reg.Host).To(Equal("10.1.2.3"))
		Expect(reg.AvailabilityZone).To(Equal("z1"))
		Expect(logger.LogMessages()).NotTo(ContainElement("opi.node-zones-not-synced"))
	})

	It("off: no node is listed or watched, and registrations get no zone look-up", func() {
		opts, synced, _ := wire()
		Expect(synced).To(BeNil())
		Expect(opts.Clients.Zone).To(BeNil())
		Expect(md.Actions()).To(BeEmpty())
	})
})
