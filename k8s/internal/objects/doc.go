// Package objects builds the Kubernetes objects of LRPs and tasks from opi's types: one
// desire's objects from one Identity (identity.go: ForDesire), the Secrets (secrets.go), the
// pod (pod.go), the Service (service.go) and the task's Job (task.go), with the codecs of the
// annotations opi writes. The workload object is the workload kind's to build, from the
// identity and the pod template. It is pure: no client, no informer, no Backend; the names,
// labels and annotations it uses are package names's.
package objects
