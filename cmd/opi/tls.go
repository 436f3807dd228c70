package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"slices"

	"code.cloudfoundry.org/lager/v3"

	"github.com/opi-bridge/opi/tlsfiles"
)

// certReloader serves the API's TLS configuration from files that may be replaced while opi
// runs (see tlsfiles): each handshake gets the configuration of the files as they are now, or
// the last one that loaded.
type certReloader struct {
	certFile, keyFile, clientCAFile string
	// clientNames, when not empty, are the subject CNs or DNS SANs a client certificate must
	// have one of (tls_client_names).
	clientNames []string
	logger      lager.Logger
	files       *tlsfiles.Reloader[*tls.Config]
}

// newCertReloader loads the files once; a failure here is a start-up error. clientNames (only
// with a clientCAFile) limit the client certificates accepted to those naming one of them.
func newCertReloader(certFile, keyFile, clientCAFile string, clientNames []string, logger lager.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, clientCAFile: clientCAFile, clientNames: clientNames, logger: logger}
	files := []string{certFile, keyFile}
	if clientCAFile != "" {
		files = append(files, clientCAFile)
	}
	var err error
	if r.files, err = tlsfiles.New(files, r.load, logger); err != nil {
		return nil, err
	}
	return r, nil
}

// TLSConfig is the listener's configuration: every handshake gets the current files' one.
func (r *certReloader) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return r.files.Get(), nil
		},
	}
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
		if len(r.clientNames) > 0 {
			cfg.VerifyConnection = r.verifyClientName
		}
	}
	return cfg, nil
}

// verifyClientName refuses, at the handshake (the client sees a bad-certificate alert), a
// client certificate that the client CA signed but that names none of clientNames in its
// subject CN or its DNS SANs. It runs after the chain was verified.
func (r *certReloader) verifyClientName(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("no client certificate")
	}
	leaf := cs.PeerCertificates[0]
	if slices.Contains(r.clientNames, leaf.Subject.CommonName) || slices.ContainsFunc(leaf.DNSNames, func(n string) bool { return slices.Contains(r.clientNames, n) }) {
		return nil
	}
	r.logger.Info("client-certificate-refused", lager.Data{"cn": leaf.Subject.CommonName, "dns-names": leaf.DNSNames, "allowed": r.clientNames})
	return fmt.Errorf("client certificate %q is not one of tls_client_names", leaf.Subject.CommonName)
}
