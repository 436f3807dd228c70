// Package agent is opi's node agent (`opi agent`): one runs on every node, follows the
// CRI log files of opi's app and task pods on that node (package podlogs) and sends each line to
// Loggregator (package loggregator) with the identity Diego's cell gives it, so `cf logs` shows
// what an app writes. Every 15 s it sends each instance's container gauges from the kubelet's
// stats summary under the instance's process guid, not the app guid: that is the source Cloud
// Controller reads an OPI process's usage from (`cf app`).
//
// It is not part of the backend: it reads opi's objects through package k8s/instances (the
// backend's records and its instance ranking, so the instance_id of a line is the index opi
// reports for its pod) and their names through k8s/names, nothing else of k8s/.
//
// Informers: the node's pods (field selector spec.nodeName, opi's APP and TASK source labels)
// say which containers to follow; an instances.Reader of the agent's own (the namespace's
// workloads, APP pods and TASK Jobs) gives each line's identity and index. One goroutine per
// followed pod polls its app container's log folder; a line's position is recorded (and the
// checkpoints saved) once the Sender acknowledged the batch holding it. The Reader holds the
// namespace's pods as records cut to what the instance ranking reads.
//
// OpsHandler serves /healthz, /readyz and the agent's Prometheus counters (`opi agent
// --ops-listen`).
package agent
