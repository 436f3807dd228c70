package localkube_test

import (
	"bytes"
	"os"
	"strconv"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/localkube"
)

var _ = Describe("Observing the components", func() {
	components := []string{localkube.Etcd, localkube.APIServer, localkube.ControllerManager, localkube.Scheduler, localkube.Kwok}

	It("names the process of each running component", func() {
		pids := cluster.Components()
		Expect(pids).To(HaveLen(len(components)))
		for _, name := range components {
			Expect(pids).To(HaveKey(name))
			Expect("/proc/" + strconv.Itoa(pids[name])).To(BeADirectory())
			cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pids[name]) + "/cmdline")
			Expect(err).NotTo(HaveOccurred())
			Expect(string(cmdline)).To(HavePrefix(cluster.BinDir() + "/" + name))
		}
	})

	DescribeTable("serves each component's /metrics",
		func(ctx SpecContext, component, metric string) {
			body, err := cluster.Get(ctx, component, "/metrics")
			Expect(err).NotTo(HaveOccurred())
			Expect(string(body)).To(ContainSubstring("# TYPE " + metric + " "))
		},
		Entry("kube-apiserver", localkube.APIServer, "apiserver_request_duration_seconds"),
		Entry("kube-controller-manager", localkube.ControllerManager, "workqueue_adds_total"),
		Entry("kube-scheduler", localkube.Scheduler, "scheduler_pending_pods"),
		Entry("etcd", localkube.Etcd, "etcd_server_has_leader"),
		Entry("kwok", localkube.Kwok, "go_goroutines"),
	)

	// kwok v0.8.0 serves only pprof's index and named profiles, not the CPU profile.
	It("serves a CPU profile of each component but kwok", func(ctx SpecContext) {
		for _, name := range []string{localkube.Etcd, localkube.APIServer, localkube.ControllerManager, localkube.Scheduler} {
			body, err := cluster.Get(ctx, name, "/debug/pprof/profile?seconds=1")
			Expect(err).NotTo(HaveOccurred(), name)
			Expect(bytes.HasPrefix(body, []byte{0x1f, 0x8b})).To(BeTrue(), "%s's profile is gzipped protobuf", name)
		}
	})

	It("says what a component answered when it is not 200 OK", func(ctx SpecContext) {
		_, err := cluster.Get(ctx, localkube.ControllerManager, "/no-such-path")
		Expect(err).To(MatchError(ContainSubstring("kube-controller-manager/no-such-path: 404")))
	})

	It("refuses a component it does not know", func(ctx SpecContext) {
		_, err := cluster.Get(ctx, "kubelet", "/metrics")
		Expect(err).To(MatchError(ContainSubstring(`no component "kubelet"`)))
	})
})
