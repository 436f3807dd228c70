package localkube

import (
	"fmt"
	"strconv"
)

// Tuning holds the control plane settings that large clusters raise from their defaults. A zero
// field keeps the component's default, so the zero Tuning is the stock control plane the test
// suites run against.
type Tuning struct {
	// kube-controller-manager --concurrent-deployment-syncs and --concurrent-replicaset-syncs
	// (default 5 each): the workers turning Deployments into ReplicaSets and ReplicaSets into pods.
	ConcurrentDeploymentSyncs, ConcurrentReplicaSetSyncs int
	// kube-controller-manager --concurrent-service-endpoint-syncs (EndpointSlices) and
	// --concurrent-endpoint-syncs (Endpoints), both default 5: every Service has both.
	ConcurrentServiceEndpointSyncs int
	// kube-controller-manager --concurrent-gc-syncs (default 20): the garbage collector's workers,
	// which delete what an owner's deletion leaves behind.
	ConcurrentGCSyncs int
	// kube-apiserver --max-requests-inflight and --max-mutating-requests-inflight (default 400
	// and 200). With priority and fairness on, their sum is the server's total concurrency, shared
	// among the priority levels.
	MaxRequestsInflight, MaxMutatingRequestsInflight int
	// etcd --quota-backend-bytes (default 2 GiB): past it etcd refuses every write ("database
	// space exceeded"); the history of a long run of thousands of apps is what fills it.
	EtcdQuotaBackendBytes int64
	// etcd --snapshot-count: committed entries between snapshots (etcd 3.6+ default 10,000).
	EtcdSnapshotCount int
	// kwok's podPlayStageParallelism (default 4): the workers that apply pod stages (scheduled to
	// Running, deletion), each one status write at a time.
	KwokPodParallelism int
}

// LargeClusterTuning is what the benchmark runs with: the settings Kubernetes' own scale setups
// raise, sized for one machine.
//   - kube-up (cluster/gce/gci/configure-helper.sh) gives clusters of 1,000 nodes or more
//     --max-requests-inflight=1500 --max-mutating-requests-inflight=500; sig-scalability's
//     5,000-node release validations ran with the same.
//   - etcd's documentation suggests 8 GiB as the largest quota for normal environments.
//   - The controller-manager's sync workers and kwok's stage workers are raised so that their
//     queues, not their worker count, show in the workqueue metrics when they fall behind.
func LargeClusterTuning() Tuning {
	return Tuning{
		ConcurrentDeploymentSyncs:      25,
		ConcurrentReplicaSetSyncs:      25,
		ConcurrentServiceEndpointSyncs: 25,
		MaxRequestsInflight:            1500,
		MaxMutatingRequestsInflight:    500,
		EtcdQuotaBackendBytes:          8 << 30,
		KwokPodParallelism:             16,
	}
}

// flag appends --name value when value is set.
func flag[T int | int64](args []string, name string, value T) []string {
	if value == 0 {
		return args
	}
	return append(args, "--"+name, strconv.FormatInt(int64(value), 10))
}

func (t Tuning) etcdArgs(args ...string) []string {
	args = flag(args, "quota-backend-bytes", t.EtcdQuotaBackendBytes)
	return flag(args, "snapshot-count", t.EtcdSnapshotCount)
}

func (t Tuning) apiServerArgs(args ...string) []string {
	args = flag(args, "max-requests-inflight", t.MaxRequestsInflight)
	return flag(args, "max-mutating-requests-inflight", t.MaxMutatingRequestsInflight)
}

func (t Tuning) controllerManagerArgs(args []string) []string {
	args = flag(args, "concurrent-deployment-syncs", t.ConcurrentDeploymentSyncs)
	args = flag(args, "concurrent-replicaset-syncs", t.ConcurrentReplicaSetSyncs)
	args = flag(args, "concurrent-service-endpoint-syncs", t.ConcurrentServiceEndpointSyncs)
	args = flag(args, "concurrent-endpoint-syncs", t.ConcurrentServiceEndpointSyncs)
	return flag(args, "concurrent-gc-syncs", t.ConcurrentGCSyncs)
}

// kwokConfig is a KwokConfiguration document (with its separator) for kwok's --config, or "" when
// nothing is tuned: kwok has no flag for its stage workers. kwok applies its defaults only when no
// such document is given, so this one states every default it does not change (those of
// sigs.k8s.io/kwok v0.8.0); kwok's own flags still override what is here.
func (t Tuning) kwokConfig() string {
	if t.KwokPodParallelism == 0 {
		return ""
	}
	return fmt.Sprintf(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  cidr: 10.0.0.0/24
  manageAllNodes: false
  enableDebuggingHandlers: true
  enableContentionProfiling: false
  enableProfilingHandler: true
  podPlayStageParallelism: %d
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
---
`, t.KwokPodParallelism)
}
