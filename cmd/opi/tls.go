package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"code.cloudfoundry.org/lager/v3"

	"github.com/opi-bridge/opi/tlsfiles"
)

// certReloader serves the API's TLS configuration from files that may be replaced while opi
// runs (see tlsfiles): each handshake gets the configuration of the files as they are now, or
// the last one that loaded.
type certReloader struct {
	certFile, keyFile, clientCAFile string
	files                           *tlsfiles.Reloader[*tls.Config]
}

// newCertReloader loads the files once; a failure here is a start-up error.
func newCertReloader(certFile, keyFile, clientCAFile string, logger lager.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, clientCAFile: clientCAFile}
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
	}
	return cfg, nil
}
