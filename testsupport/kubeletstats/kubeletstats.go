// Package kubeletstats is a stand-in of the kubelet's stats summary (`GET /stats/summary` over
// TLS with a bearer token) for the node agent's suites: it serves the Summary a test sets.
package kubeletstats

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"

	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Server is a running stand-in.
type Server struct {
	srv    *httptest.Server
	token  string
	caFile string

	mu       sync.Mutex
	summary  statsv1alpha1.Summary
	requests int
	refused  int
}

// Start serves on a loopback port with TLS, writes its CA into dir and accepts only token.
func Start(dir, token string) (*Server, error) {
	s := &Server{token: token}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.StartTLS()
	s.caFile = filepath.Join(dir, "kubelet-ca.pem")
	block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
	if err := os.WriteFile(s.caFile, block, 0o600); err != nil {
		s.srv.Close()
		return nil, fmt.Errorf("write kubelet stand-in CA: %w", err)
	}
	return s, nil
}

// URL is the kubelet's base URL (https://127.0.0.1:PORT).
func (s *Server) URL() string { return s.srv.URL }

// CAFile is the PEM file of the certificate the stand-in serves.
func (s *Server) CAFile() string { return s.caFile }

// Close stops it.
func (s *Server) Close() { s.srv.Close() }

// SetSummary is what the next requests are answered.
func (s *Server) SetSummary(sum statsv1alpha1.Summary) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.summary = sum
}

// Requests counts the summaries served; Refused the requests without the token.
func (s *Server) Requests() (served, refused int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests, s.refused
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+s.token {
		s.refused++
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	if r.Method != http.MethodGet || r.URL.Path != "/stats/summary" {
		http.NotFound(w, r)
		return
	}
	s.requests++
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.summary)
}
