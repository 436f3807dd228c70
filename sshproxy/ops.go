package sshproxy

import (
	"encoding/json"
	"net/http"

	"code.cloudfoundry.org/lager/v3"
	"k8s.io/client-go/kubernetes"

	"github.com/opi-bridge/opi/k8s/instances"
	"github.com/opi-bridge/opi/k8s/instances/clientset"
)

// NewInstances is the read side of opi's LRPs in namespace for the proxy (not started), as
// opi reports them: StatefulSets when opi runs its LRPs as StatefulSets.
func NewInstances(client kubernetes.Interface, namespace string, statefulSets bool, logger lager.Logger) *instances.Reader {
	return instances.New(clientset.Sources(client, namespace), instances.Options{Namespace: namespace, StatefulSets: statefulSets, Logger: logger})
}

// OpsHandler serves /healthz, /readyz (once ready says so) and /fingerprints, the host key's
// fingerprints as JSON for CC's app_ssh.host_key_fingerprint.
func (s *Server) OpsHandler(ready func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "the instances are not read yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("GET /fingerprints", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.prints)
	})
	return mux
}
