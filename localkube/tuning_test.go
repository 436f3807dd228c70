package localkube

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("Tuning", func() {
	It("changes no flag and writes no kwok configuration when zero", func() {
		var t Tuning
		Expect(t.etcdArgs("--a")).To(Equal([]string{"--a"}))
		Expect(t.apiServerArgs("--a")).To(Equal([]string{"--a"}))
		Expect(t.controllerManagerArgs([]string{"--a"})).To(Equal([]string{"--a"}))
		Expect(t.kwokConfig()).To(BeEmpty())
	})

	It("passes each setting to its component", func() {
		t := Tuning{
			ConcurrentDeploymentSyncs: 1, ConcurrentReplicaSetSyncs: 2, ConcurrentServiceEndpointSyncs: 3,
			ConcurrentGCSyncs: 4, MaxRequestsInflight: 5, MaxMutatingRequestsInflight: 6,
			EtcdQuotaBackendBytes: 8 << 30, EtcdSnapshotCount: 7, KwokPodParallelism: 9,
		}
		Expect(t.etcdArgs()).To(Equal([]string{"--quota-backend-bytes", "8589934592", "--snapshot-count", "7"}))
		Expect(t.apiServerArgs()).To(Equal([]string{"--max-requests-inflight", "5", "--max-mutating-requests-inflight", "6"}))
		Expect(t.controllerManagerArgs(nil)).To(Equal([]string{
			"--concurrent-deployment-syncs", "1", "--concurrent-replicaset-syncs", "2",
			"--concurrent-service-endpoint-syncs", "3", "--concurrent-endpoint-syncs", "3",
			"--concurrent-gc-syncs", "4",
		}))
		Expect(t.kwokConfig()).To(ContainSubstring("kind: KwokConfiguration"))
		Expect(t.kwokConfig()).To(ContainSubstring("podPlayStageParallelism: 9\n"))
		// kwok skips its defaults when given a configuration: the ones it needs are stated.
		Expect(t.kwokConfig()).To(ContainSubstring("nodeLeaseParallelism: 4\n"))
		Expect(t.kwokConfig()).To(HaveSuffix("---\n"))
	})
})
