// Package tcptarget holds the loopback TCP servers that tunnel tests and benchmarks reach through
// port-forwards: an echo server, and a source that sends a fixed number of bytes.
package tcptarget

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// Server serves every connection it accepts with one handler.
type Server struct {
	listener net.Listener
	handle   func(net.Conn)

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup // the accept loop and every handler
}

// Echo serves connections that send back every byte read. After limit bytes (0: no limit) it
// closes the connection, so that the client sees the end of a reply whose length it knows even
// where its own end cannot reach the server (kwok's port-forward does not pass it on);
// without a limit it ends the reply when the client's side ends.
func Echo(limit int64) (*Server, error) {
	return start(func(c net.Conn) {
		var in io.Reader = c
		if limit > 0 {
			in = io.LimitReader(c, limit)
		}
		_, _ = io.Copy(c, in)
	})
}

// Source serves connections that get n bytes and then the connection's end. Through kwok's
// port-forward that end reaches the client only once the client has ended its own side.
func Source(n int64) (*Server, error) {
	return start(func(c net.Conn) {
		_, _ = io.CopyN(c, zeros{}, n)
	})
}

func start(handle func(net.Conn)) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &Server{listener: l, handle: handle, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the server's address ("127.0.0.1:port").
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Port is the server's port.
func (s *Server) Port() int { return s.listener.Addr().(*net.TCPAddr).Port }

// Close stops listening, closes every connection and waits for their handlers. Closing again
// does nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	err := s.listener.Close()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.listener.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			_ = c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.handle(c)
			_ = c.Close()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// zeros reads as an endless run of zero bytes, without allocating.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// HalfCloser is a connection whose write side closes apart (TCP, an SSH channel).
type HalfCloser interface {
	io.ReadWriter
	CloseWrite() error
}

// RoundTrip sends out through conn while it reads what comes back, ends its own side once out
// is sent, and returns what came back until the other side's end: with an Echo server behind
// conn, out itself when the bytes went both ways whole and the end came through.
func RoundTrip(conn HalfCloser, out []byte) ([]byte, error) {
	sent := make(chan error, 1)
	go func() {
		_, err := conn.Write(out)
		if err == nil {
			err = conn.CloseWrite()
		}
		sent <- err
	}()
	in, err := io.ReadAll(conn)
	if err != nil {
		return in, fmt.Errorf("reading: %w", err)
	}
	if err := <-sent; err != nil {
		return in, fmt.Errorf("writing: %w", err)
	}
	return in, nil
}
