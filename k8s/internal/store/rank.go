package store

import (
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"github.com/opi-bridge/opi/opi"
)

// Which pod reports which instance index. GetInstances, StopInstance and the crash reporter use
// these through the Store; they are pure functions of the records so that a reader outside opi's
// process (the node agent, which reports logs by index) computes the same indices.

// InstancePods are the pods that report the workload's instances: position i holds instance i,
// nil when no pod reports it (yet); at most the desired count. byOrdinal (StatefulSets) puts
// each pod at its ordinal (OrdinalPods), else they are ranked (RankedPods, ADR 0002).
func InstancePods(pods []*PodRecord, w *WorkloadRecord, byOrdinal bool) []*PodRecord {
	if byOrdinal {
		return OrdinalPods(pods, w)
	}
	return RankedPods(pods, w)
}

// RankedPods are the pods that report a workload's instances, at most its desired count, in
// index order (ADR 0002). A pod that cannot serve never hides or displaces one that can:
//   - terminating pods are left out;
//   - failed pods (evicted, shut down: the ReplicaSet leaves them and starts a replacement) are
//     left out while live pods fill the desired count, and fill only the indices no live pod
//     takes, newest first, so a crash nothing has replaced yet still shows;
//   - when there are more live pods than desired (a rollout's surge, a scale-down), the ones
//     kept are, in turn, Ready pods of the current template, Ready superseded pods (an old
//     ReplicaSet's, still serving), the current template's starting or crashing pods, and
//     superseded pods that are not Ready; older before newer within each.
//
// The kept pods are then ranked by creation time, then name, so an index stays with its pod
// while the set of pods does not change.
func RankedPods(pods []*PodRecord, d *WorkloadRecord) []*PodRecord {
	replicas := int(d.ReplicaCount)
	live := make([]*PodRecord, 0, len(pods))
	var failed []*PodRecord
	for _, p := range pods {
		switch {
		case p.DeletionTimestamp != nil:
		case p.Terminal:
			failed = append(failed, p)
		default:
			live = append(live, p)
		}
	}
	if len(live) > replicas {
		keep := func(p *PodRecord) int {
			rank := 0
			if p.State != opi.InstanceRunning {
				rank += 2
			}
			if p.Superseded(d) {
				rank++
			}
			return rank
		}
		sort.SliceStable(live, func(i, j int) bool {
			if ki, kj := keep(live[i]), keep(live[j]); ki != kj {
				return ki < kj
			}
			return CreatedBefore(live[i], live[j])
		})
		live = live[:replicas]
	}
	sort.Slice(live, func(i, j int) bool { return CreatedBefore(live[i], live[j]) })
	if missing := replicas - len(live); missing > 0 && len(failed) > 0 {
		sort.Slice(failed, func(i, j int) bool { return CreatedBefore(failed[j], failed[i]) })
		failed = failed[:min(missing, len(failed))]
		sort.Slice(failed, func(i, j int) bool { return CreatedBefore(failed[i], failed[j]) })
		live = append(live, failed...)
	}
	return live
}

// OrdinalPods puts each pod at its ordinal: instance i is the pod with ordinal i, and no pod
// at all while it does not exist (not created yet, or being replaced). The StatefulSet
// controller never runs two pods of one ordinal (they share a name), so no ranking is needed:
//   - terminating pods are left out (a stopped instance is not reported; its successor of the
//     same ordinal is, once created);
//   - a failed pod (evicted) keeps its ordinal as CRASHED until the controller, which deletes
//     failed pods, has replaced it;
//   - ordinals at or above the desired count (a scale-down in progress) are not reported.
//
// The slice is as long as the highest reported ordinal + 1, at most the desired count.
func OrdinalPods(pods []*PodRecord, w *WorkloadRecord) []*PodRecord {
	replicas := w.ReplicaCount
	var out []*PodRecord
	for _, p := range pods {
		if p.DeletionTimestamp != nil || p.Ordinal < 0 || p.Ordinal >= replicas {
			continue
		}
		if int(p.Ordinal) >= len(out) {
			out = append(out, make([]*PodRecord, int(p.Ordinal)+1-len(out))...)
		}
		if cur := out[p.Ordinal]; cur == nil || CreatedBefore(cur, p) {
			out[p.Ordinal] = p
		}
	}
	return out
}

// CreatedBefore orders pods by creation time, then name.
func CreatedBefore(a, b *PodRecord) bool {
	ta, tb := a.CreationTimestamp, b.CreationTimestamp
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	return a.Name < b.Name
}

// InstanceIndex is the pod's index as InstancePods reports it among pods, the LRP's pods, with
// w its workload (nil when gone). A pod that InstancePods does not report (terminating,
// surplus, or its workload gone) gets the rank it has among its LRP's live pods by creation
// time, then name. With byOrdinal a pod's index is its ordinal, reported or not.
func InstanceIndex(pod *PodRecord, pods []*PodRecord, w *WorkloadRecord, byOrdinal bool) int32 {
	if byOrdinal && pod.Ordinal >= 0 {
		return pod.Ordinal
	}
	if w != nil {
		for i, p := range InstancePods(pods, w, byOrdinal) {
			if p != nil && p.UID == pod.UID {
				return int32(i)
			}
		}
	}
	var index int32
	for _, p := range pods {
		if p == pod || p.DeletionTimestamp != nil || p.Terminal || p.UID == pod.UID {
			continue
		}
		if CreatedBefore(p, pod) {
			index++
		}
	}
	return index
}

// InstanceIndexer is InstanceIndex for every pod of pods at the cost of one ranking: the
// returned function gives each pod the index InstanceIndex(pod, pods, w, byOrdinal) gives it,
// where calling InstanceIndex per pod ranks all of the LRP's pods again for each (quadratic in
// the instances). pods must not change while the function is used.
func InstanceIndexer(pods []*PodRecord, w *WorkloadRecord, byOrdinal bool) func(pod *PodRecord) int32 {
	reported := map[types.UID]int32{}
	if w != nil {
		for i, p := range InstancePods(pods, w, byOrdinal) {
			if p == nil {
				continue
			}
			if _, seen := reported[p.UID]; !seen {
				reported[p.UID] = int32(i)
			}
		}
	}
	live := make([]*PodRecord, 0, len(pods))
	for _, p := range pods {
		if p.DeletionTimestamp == nil && !p.Terminal {
			live = append(live, p)
		}
	}
	sort.Slice(live, func(i, j int) bool { return CreatedBefore(live[i], live[j]) })
	// positions are where each UID's records are in live, in order.
	positions := make(map[types.UID][]int, len(live))
	for i, p := range live {
		positions[p.UID] = append(positions[p.UID], i)
	}
	return func(pod *PodRecord) int32 {
		if byOrdinal && pod.Ordinal >= 0 {
			return pod.Ordinal
		}
		if i, ok := reported[pod.UID]; ok {
			return i
		}
		// The live pods created before pod, the pod itself (or a record of its UID) not counted.
		n := sort.Search(len(live), func(i int) bool { return !CreatedBefore(live[i], pod) })
		return int32(n - sort.SearchInts(positions[pod.UID], n))
	}
}
