// Package natsserver runs a real NATS server (github.com/nats-io/nats-server/v2) in the test's
// process, on a loopback port the OS chooses, optionally with users and passwords and with TLS
// that requires client certificates (BOSH's nats-tls). It can be shut down and started again on
// the same port, for reconnect tests.
package natsserver

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// readyTimeout bounds how long a start waits for the server to accept connections.
const readyTimeout = 10 * time.Second

// TLS are the server's certificate and the CA its clients' certificates must be signed by.
type TLS struct {
	CertFile, KeyFile, ClientCAFile string
}

// Options of a server. The zero value is a plain server without authentication.
type Options struct {
	// Users are user names and their passwords; none: no authentication.
	Users map[string]string
	// TLS, when set, is required of every client, with a client certificate.
	TLS *TLS
}

// Server is a running (or shut down) NATS server.
type Server struct {
	mu   sync.Mutex
	opts Options
	port int
	srv  *server.Server
}

// Start starts a server on 127.0.0.1 and a port the OS chooses.
func Start(opts Options) (*Server, error) {
	s := &Server{opts: Options{Users: maps.Clone(opts.Users), TLS: opts.TLS}, port: server.RANDOM_PORT}
	if err := s.start(); err != nil {
		return nil, err
	}
	return s, nil
}

// URL is nats://127.0.0.1:<port>, or tls:// with TLS.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	scheme := "nats"
	if s.opts.TLS != nil {
		scheme = "tls"
	}
	return fmt.Sprintf("%s://127.0.0.1:%d", scheme, s.port)
}

// Shutdown stops the server and waits until it stopped; its clients are disconnected.
func (s *Server) Shutdown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

// Restart starts a server that was shut down again, on the same port, with the same options
// (and the users of the last SetUsers).
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return errors.New("nats server is running")
	}
	return s.startLocked()
}

// SetUsers replaces the users: at once when the server runs (a configuration reload: clients
// whose user is gone are disconnected), at the next Restart when it does not.
func (s *Server) SetUsers(users map[string]string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.Users = maps.Clone(users)
	if s.srv == nil {
		return nil
	}
	opts, err := s.options()
	if err != nil {
		return err
	}
	return s.srv.ReloadOptions(opts)
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startLocked()
}

func (s *Server) startLocked() error {
	opts, err := s.options()
	if err != nil {
		return err
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("make nats server: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		return fmt.Errorf("nats server did not start within %s", readyTimeout)
	}
	s.srv = srv
	s.port = srv.Addr().(*net.TCPAddr).Port
	return nil
}

func (s *Server) options() (*server.Options, error) {
	opts := &server.Options{
		Host: "127.0.0.1", Port: s.port,
		NoLog: true, NoSigs: true,
		// No HTTP monitoring, no cluster: a client port only.
		HTTPPort: 0,
	}
	for user, password := range s.opts.Users {
		opts.Users = append(opts.Users, &server.User{Username: user, Password: password})
	}
	if t := s.opts.TLS; t != nil {
		cfg, err := server.GenTLSConfig(&server.TLSConfigOpts{
			CertFile: t.CertFile, KeyFile: t.KeyFile, CaFile: t.ClientCAFile, Verify: true,
		})
		if err != nil {
			return nil, fmt.Errorf("nats server tls: %w", err)
		}
		opts.TLS, opts.TLSVerify, opts.TLSConfig, opts.TLSTimeout = true, true, cfg, 5
	}
	return opts, nil
}
