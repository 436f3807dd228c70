// Package ccstandin is a stand-in for Cloud Controller's internal API: an HTTPS server with
// mutual TLS (or plain HTTP) on loopback that records every callback opi sends (task
// completions, staging results, crash reports) and can be told to fail the first attempts to a
// path, to prove retries, or to never answer. The integration suite and `make run` use it, and
// start opi with the flags OpiArgs gives (opi accepts callbacks only to endpoints it is told).
//
// Besides recording, it answers GET /callbacks with every callback so far as a JSON array
// (curl it to see what opi told "CC").
package ccstandin

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/opi-bridge/opi/testsupport/pki"
)

// Callback is one request the stand-in received.
type Callback struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Body   json.RawMessage `json:"body"`
	// Status is what the stand-in answered (0: nothing, it was stalled).
	Status int       `json:"status"`
	Time   time.Time `json:"time"`
}

// Options configure Start.
type Options struct {
	// Dir is where the certificates are written (TLS only). Required with TLS.
	Dir string
	// TLS serves HTTPS and requires a client certificate signed by the stand-in's CA.
	TLS bool
	// Addr to listen on; default 127.0.0.1:0.
	Addr string
	// Log, when set, gets one line per callback.
	Log io.Writer
}

// Server is a running stand-in.
type Server struct {
	// URL is the base URL (https://127.0.0.1:port or http://...).
	URL string
	// CAFile is the CA that signed the stand-in's server certificate (opi's cc.ca).
	// ClientCertFile and ClientKeyFile are a client certificate the stand-in accepts (opi's
	// cc.client_cert and cc.client_key). Empty without TLS.
	CAFile, ClientCertFile, ClientKeyFile string

	server   *http.Server
	listener net.Listener
	log      io.Writer

	mu        sync.Mutex
	callbacks []Callback
	failures  map[string]failure
	stalled   bool
	held      int
	// closed ends the requests held by Stall.
	closed chan struct{}
}

type failure struct {
	remaining int
	status    int
}

// Start starts a stand-in.
func Start(opts Options) (*Server, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	s := &Server{log: opts.Log, failures: map[string]failure{}, closed: make(chan struct{})}
	listener, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	scheme := "http"
	if opts.TLS {
		tlsConfig, err := s.writeCertificates(opts.Dir)
		if err != nil {
			listener.Close()
			return nil, err
		}
		listener = tls.NewListener(listener, tlsConfig)
		scheme = "https"
	}
	s.listener = listener
	s.URL = scheme + "://" + listener.Addr().String()
	s.server = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.server.Serve(listener) }()
	return s, nil
}

func (s *Server) writeCertificates(dir string) (*tls.Config, error) {
	if dir == "" {
		return nil, fmt.Errorf("ccstandin: TLS needs a folder for its certificates")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := pki.NewCA("cc-standin-ca")
	if err != nil {
		return nil, err
	}
	serverPair, err := ca.Server("cc-standin")
	if err != nil {
		return nil, err
	}
	clientPair, err := ca.Client("opi")
	if err != nil {
		return nil, err
	}
	if s.CAFile, err = ca.WriteCert(dir, "cc-ca"); err != nil {
		return nil, err
	}
	if s.ClientCertFile, s.ClientKeyFile, err = clientPair.Write(dir, "cc-client"); err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(serverPair.CertPEM, serverPair.KeyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}, nil
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/callbacks" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Callbacks())
		return
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	status := http.StatusOK
	s.mu.Lock()
	if s.stalled {
		s.callbacks = append(s.callbacks, Callback{Method: r.Method, Path: r.URL.Path, Body: rawJSON(body), Time: time.Now()})
		s.held++
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			s.held--
			s.mu.Unlock()
		}()
		if s.log != nil {
			fmt.Fprintf(s.log, "cc-standin: %s %s -> (stalled, no answer)\n", r.Method, r.URL.Path)
		}
		select {
		case <-r.Context().Done():
		case <-s.closed:
		}
		return
	}
	if f, ok := s.failures[r.URL.Path]; ok && f.remaining > 0 {
		status = f.status
		f.remaining--
		s.failures[r.URL.Path] = f
	}
	cb := Callback{Method: r.Method, Path: r.URL.Path, Body: rawJSON(body), Status: status, Time: time.Now()}
	s.callbacks = append(s.callbacks, cb)
	s.mu.Unlock()
	if s.log != nil {
		fmt.Fprintf(s.log, "cc-standin: %s %s -> %d %s\n", cb.Method, cb.Path, status, body)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write([]byte("{}"))
}

// rawJSON is a body as recorded: itself when it is JSON, else as a JSON string.
func rawJSON(body []byte) json.RawMessage {
	if json.Valid(body) {
		return json.RawMessage(body)
	}
	raw, _ := json.Marshal(string(body))
	return raw
}

// FailNext makes the next n requests to path answer status (e.g. 503) before it accepts again.
func (s *Server) FailNext(path string, n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures[path] = failure{remaining: n, status: status}
}

// Stall makes the stand-in a callback endpoint that never answers: every request but GET
// /callbacks is read, recorded with Status 0, and then held until the client gives up or Close.
func (s *Server) Stall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stalled = true
}

// Held is how many requests a stalled stand-in holds right now.
func (s *Server) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// OpiArgs are the flags that make opi send its callbacks to this stand-in: its URL as
// cc.internal_url (the one endpoint callbacks may go to, crash reports included) and, over
// TLS, the CA of its server certificate and a client certificate it accepts. Every suite and
// `make run` that starts opi with a stand-in uses these.
func (s *Server) OpiArgs() []string {
	args := []string{"--cc-internal-url", s.URL}
	if s.CAFile != "" {
		args = append(args, "--cc-ca", s.CAFile, "--cc-client-cert", s.ClientCertFile, "--cc-client-key", s.ClientKeyFile)
	}
	return args
}

// Callbacks are every request received so far, oldest first.
func (s *Server) Callbacks() []Callback {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Callback(nil), s.callbacks...)
}

// CallbacksTo are the requests received for path, oldest first.
func (s *Server) CallbacksTo(path string) []Callback {
	var out []Callback
	for _, cb := range s.Callbacks() {
		if cb.Path == path {
			out = append(out, cb)
		}
	}
	return out
}

// Accepted are the requests received under the path prefix that the stand-in answered 2xx.
func (s *Server) Accepted(prefix string) []Callback {
	var out []Callback
	for _, cb := range s.Callbacks() {
		if strings.HasPrefix(cb.Path, prefix) && cb.Status/100 == 2 {
			out = append(out, cb)
		}
	}
	return out
}

// Close stops the stand-in.
func (s *Server) Close() error {
	s.mu.Lock()
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
	s.mu.Unlock()
	return s.server.Close()
}
