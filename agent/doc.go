// Package agent is opi's node agent (`opi agent`): one runs on every node, follows the
// CRI log files of opi's app and task pods on that node (package podlogs) and sends each line to
// Loggregator (package loggregator) with the identity Diego's cell gives it, so `cf logs` shows
// what an app writes.
//
// It is not part of the backend: it imports k8s/store (the records and opi's own instance
// ranking, so the instance_id of a line is the index opi reports for its pod) and k8s/spec (the
// labels and annotations), nothing of k8s/ above the store.
//
// Informers: the node's pods (field selector spec.nodeName, opi's APP and TASK source labels)
// say which containers to follow; the namespace's workloads, APP pods and TASK Jobs (a
// store.Store of the agent's own) give each line's identity and index. One goroutine per
// followed pod polls its app container's log folder; a line's position is recorded (and the
// checkpoints saved) once the Sender acknowledged the batch holding it. The namespace's pods are
// held as store records stripped to what the instance ranking reads (ops.go: rankedPodOf).
//
// OpsHandler serves /healthz, /readyz and the agent's Prometheus counters (`opi agent
// --ops-listen`).
package agent
