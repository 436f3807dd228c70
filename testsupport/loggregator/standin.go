// Package loggregator is a stand-in for a Loggregator v2 ingress (an agent's or a Doppler's):
// a gRPC server with mutual TLS on loopback implementing the module's generated IngressServer
// (Sender, BatchSender, Send), recording every envelope it receives. It can be stopped and
// started again on the same port, to prove what a client does through an outage. Certificates
// come from testsupport/pki; the server's certificate is also valid for "metron", the name the
// module's TLS helpers expect.
package loggregator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/opi-bridge/opi/testsupport/pki"
)

// ServerName is the name the stand-in's certificate is valid for besides loopback.
const ServerName = "metron"

// Server is a running (or stopped) stand-in.
type Server struct {
	loggregator_v2.UnimplementedIngressServer

	addr  string
	creds credentials.TransportCredentials
	files ClientFiles

	mu        sync.Mutex
	grpc      *grpc.Server
	lis       net.Listener
	envelopes []*loggregator_v2.Envelope
	sends     int
	observe   func(at time.Time, envs []*loggregator_v2.Envelope)
}

// ClientFiles are the PEM files a client presents and trusts.
type ClientFiles struct {
	CA, Cert, Key string
}

// Start writes a CA, a server and a client certificate into dir and serves on a free loopback
// port.
func Start(dir string) (*Server, error) {
	ca, err := pki.NewCA("loggregator-standin-ca")
	if err != nil {
		return nil, err
	}
	server, err := ca.Server("loggregator-standin", ServerName)
	if err != nil {
		return nil, err
	}
	client, err := ca.Client("opi-agent")
	if err != nil {
		return nil, err
	}
	var files ClientFiles
	if files.CA, err = ca.WriteCert(dir, "loggregator-ca"); err != nil {
		return nil, err
	}
	if files.Cert, files.Key, err = client.Write(dir, "loggregator-client"); err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(server.CertPEM, server.KeyPEM)
	if err != nil {
		return nil, fmt.Errorf("load stand-in certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	s := &Server{
		files: files,
		creds: credentials.NewTLS(&tls.Config{
			Certificates: []tls.Certificate{cert},
			ClientCAs:    pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
		}),
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s.addr = lis.Addr().String()
	s.serve(lis)
	return s, nil
}

// Addr is host:port of the stand-in (the same after Restart).
func (s *Server) Addr() string { return s.addr }

// ClientFiles are the CA, certificate and key a client needs.
func (s *Server) ClientFiles() ClientFiles { return s.files }

func (s *Server) serve(lis net.Listener) {
	g := grpc.NewServer(grpc.Creds(s.creds))
	loggregator_v2.RegisterIngressServer(g, s)
	s.mu.Lock()
	s.grpc, s.lis = g, lis
	s.mu.Unlock()
	go func() { _ = g.Serve(lis) }()
}

// Stop closes the listener and every connection; Restart serves again on the same port.
func (s *Server) Stop() {
	s.mu.Lock()
	g, lis := s.grpc, s.lis
	s.grpc, s.lis = nil, nil
	s.mu.Unlock()
	if g != nil {
		g.Stop()
		// Serve's goroutine may not have begun yet: gRPC's Stop knows only the listeners
		// Serve took (and a late Serve closes its listener only when it runs), so the port would
		// stay taken for a moment and a Restart right after could not listen on it.
		_ = lis.Close()
	}
}

// Restart serves again on the stand-in's port after Stop.
func (s *Server) Restart() error {
	s.mu.Lock()
	running := s.grpc != nil
	s.mu.Unlock()
	if running {
		return errors.New("the stand-in is running")
	}
	lis, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listen again on %s: %w", s.addr, err)
	}
	s.serve(lis)
	return nil
}

// Envelopes is every envelope received so far, in order of arrival.
func (s *Server) Envelopes() []*loggregator_v2.Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*loggregator_v2.Envelope(nil), s.envelopes...)
}

// Sends counts the unary Send calls answered.
func (s *Server) Sends() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sends
}

// Observe hands what arrives from now on to fn, with its arrival time, instead of recording it
// (a benchmark's millions of envelopes are not kept; Envelopes no longer grows).
func (s *Server) Observe(fn func(at time.Time, envs []*loggregator_v2.Envelope)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.observe = fn
}

func (s *Server) record(envs ...*loggregator_v2.Envelope) {
	s.mu.Lock()
	observe := s.observe
	if observe == nil {
		s.envelopes = append(s.envelopes, envs...)
	}
	s.mu.Unlock()
	if observe != nil {
		observe(time.Now(), envs)
	}
}

// Send records a batch (the unary call a client that needs acknowledgements uses).
func (s *Server) Send(_ context.Context, batch *loggregator_v2.EnvelopeBatch) (*loggregator_v2.SendResponse, error) {
	s.record(batch.GetBatch()...)
	s.mu.Lock()
	s.sends++
	s.mu.Unlock()
	return &loggregator_v2.SendResponse{}, nil
}

// Sender records a stream of single envelopes.
func (s *Server) Sender(stream loggregator_v2.Ingress_SenderServer) error {
	for {
		env, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&loggregator_v2.IngressResponse{})
		}
		if err != nil {
			return err
		}
		s.record(env)
	}
}

// BatchSender records a stream of batches (what the module's IngressClient uses).
func (s *Server) BatchSender(stream loggregator_v2.Ingress_BatchSenderServer) error {
	for {
		batch, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&loggregator_v2.BatchSenderResponse{})
		}
		if err != nil {
			return err
		}
		s.record(batch.GetBatch()...)
	}
}
