// Package spec builds the Kubernetes objects of LRPs and tasks from opi's types, and holds
// the names, labels and annotations opi puts on them with their codecs. It is pure: no client,
// no informer, no Backend (k8s/README.md, "Packages and the rules that make them last").
package objects
