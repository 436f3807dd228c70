package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"

	"code.cloudfoundry.org/lager/v3"
)

// certReloader serves the API's TLS configuration from files that may be replaced while opi
// runs: certificates are rotated by rewriting them (cert-manager, a Secret volume's atomic
// symlink swap, BOSH), and opi picks the new ones up at the next handshake without a restart.
//
// Each handshake stats the files (no watch, no polling loop: a stat per new connection costs
// little next to the handshake) and reloads them when one changed. A half-done rotation (a new
// certificate beside the old key) fails to load: the previous configuration keeps serving, the
// error is logged, and the next handshake tries again.
type certReloader struct {
	certFile, keyFile, clientCAFile string
	logger                          lager.Logger

	mu      sync.Mutex
	current *tls.Config
	seen    []os.FileInfo
}

// newCertReloader loads the files once; a failure here is a start-up error.
func newCertReloader(certFile, keyFile, clientCAFile string, logger lager.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, clientCAFile: clientCAFile, logger: logger}
	seen, err := r.stat()
	if err != nil {
		return nil, err
	}
	cfg, err := r.load()
	if err != nil {
		return nil, err
	}
	r.current, r.seen = cfg, seen
	return r, nil
}

// TLSConfig is the listener's configuration: every handshake gets the current files' one.
func (r *certReloader) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.config(), nil
		},
	}
}

func (r *certReloader) files() []string {
	files := []string{r.certFile, r.keyFile}
	if r.clientCAFile != "" {
		files = append(files, r.clientCAFile)
	}
	return files
}

func (r *certReloader) stat() ([]os.FileInfo, error) {
	var infos []os.FileInfo
	for _, f := range r.files() {
		info, err := os.Stat(f) // follows symlinks: a Secret volume swaps the link's target
		if err != nil {
			return nil, fmt.Errorf("tls file: %w", err)
		}
		infos = append(infos, info)
	}
	return infos, nil
}

func unchanged(a, b []os.FileInfo) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !os.SameFile(a[i], b[i]) || !a[i].ModTime().Equal(b[i].ModTime()) || a[i].Size() != b[i].Size() {
			return false
		}
	}
	return true
}

// config is the configuration of the files as they are now, or the last one that loaded.
func (r *certReloader) config() *tls.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen, err := r.stat()
	if err != nil {
		r.logger.Error("tls-reload-failed", err)
		return r.current
	}
	if unchanged(seen, r.seen) {
		return r.current
	}
	cfg, err := r.load()
	if err != nil {
		r.logger.Error("tls-reload-failed", err)
		return r.current
	}
	r.current, r.seen = cfg, seen
	r.logger.Info("tls-reloaded", lager.Data{"cert": r.certFile, "client-ca": r.clientCAFile})
	return cfg
}

// load reads the files into a TLS 1.2+ configuration that requires a client certificate signed
// by the client CA when one is configured.
func (r *certReloader) load() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return nil, fmt.Errorf("load tls certificate: %w", err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if r.clientCAFile != "" {
		pem, err := os.ReadFile(r.clientCAFile)
		if err != nil {
			return nil, fmt.Errorf("read tls client ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls client ca %s holds no PEM certificate", r.clientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
