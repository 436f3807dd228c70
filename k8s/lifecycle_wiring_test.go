package k8s_test

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/lifecycle/lifecyclefakes"
	"github.com/opi-bridge/opi/opi"
)

// The lifecycle lines' own specs are in k8s/internal/lifecycle and k8s/internal/staging; this proves the root's
// wiring of Clients.Lifecycle: the leader work "lifecycle" and the staging's lines.
var _ = Describe("Lifecycle lines wiring", func() {
	It("sends the CELL lines of the LRPs' pods and the STG lines of the stagings to Clients.Lifecycle", func() {
		ctx := context.Background()
		client := backendtest.NewClient()
		emitter := new(lifecyclefakes.FakeEmitter)
		emitter.EmitReturns(true)
		reader := new(fakes.FakeImageReader)
		reader.ReadImageConfigReturns(&opi.ImageConfig{}, nil)
		backend := backendtest.StartBackendWith(client, k8s.Options{
			Clients:   k8s.Clients{Lifecycle: emitter},
			Notifiers: k8s.Notifiers{ImageReader: reader, Staging: new(fakes.FakeStagingNotifier)},
		})
		lrp := backendtest.SampleLRP()
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		leaderCtx, stop := context.WithCancel(ctx)
		var done sync.WaitGroup
		done.Go(func() { backend.RunLeaderWork(leaderCtx) })
		DeferCleanup(func() { stop(); done.Wait() })

		// Created after the term began (the API server stamps whole seconds): its line is new.
		pod := backendtest.NewPod(lrp, "pod-a", time.Now().Add(time.Minute), corev1.PodStatus{Phase: corev1.PodPending})
		pod.UID = "pod-uid-a"
		backendtest.CreatePod(client, pod)
		Expect(backend.Stage(ctx, &opi.Staging{GUID: "s-1", AppGUID: "staged-app", Image: "busybox",
			CallbackURL: "https://cc.internal:9023/staging/s-1"})).To(Succeed())

		lines := func() map[string][]string {
			out := map[string][]string{}
			for i := range emitter.EmitCallCount() {
				env, _ := emitter.EmitArgsForCall(i)
				key := env.GetTags()["source_type"] + " " + env.GetSourceId()
				out[key] = append(out[key], string(env.GetLog().GetPayload()))
			}
			return out
		}
		Eventually(lines).Should(Equal(map[string][]string{
			"CELL " + lrp.AppGUID: {"Creating instance pod-uid-a"},
			"STG staged-app": {
				"Reading the configuration of image busybox",
				"Staging complete: image busybox, process types: web, ports: none exposed, user: the image's default",
			},
		}))
	})
})
