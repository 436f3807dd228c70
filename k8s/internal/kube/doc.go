// Package kube holds generic helpers for talking to the Kubernetes API with client-go typed
// clients: create-or-get, owner patches, error classification,
// resource version comparison and bounded waits. It knows nothing of LRPs or of opi, so it
// could be extracted and reused.
package kube
