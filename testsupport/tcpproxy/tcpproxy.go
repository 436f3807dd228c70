// Package tcpproxy is a loopback TCP proxy for tests: it forwards every connection to one
// target, bytes untouched (TLS passes through), and can cut every connection it carries while
// it keeps listening, so that clients reconnect through it. Tests put it between opi and the
// API server to end opi's watches (and whatever else is in flight) while the API server stays
// up, as the API server itself does to watches at their timeout and under load.
package tcpproxy

import (
	"fmt"
	"io"
	"net"
	"sync"
)

// Proxy forwards the connections it accepts to its target.
type Proxy struct {
	listener net.Listener
	target   string

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // both ends of every connection carried
	closed bool
	wg     sync.WaitGroup // the accept loop and every forward
}

// Start listens on a loopback port the OS chooses and forwards to target ("host:port").
func Start(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	p := &Proxy{listener: l, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address ("127.0.0.1:port").
func (p *Proxy) Addr() string { return p.listener.Addr().String() }

// CutAll closes every connection the proxy carries now, both ends, and keeps listening: the
// clients see their connections end and connect again. It returns how many it cut.
func (p *Proxy) CutAll() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
		n++
	}
	return n / 2
}

// Close stops listening and closes every connection. Closing again does nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.listener.Close()
	p.CutAll()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.forward(client)
	}
}

// forward carries one client connection to a new connection to the target until either ends
// or CutAll closes both.
func (p *Proxy) forward(client net.Conn) {
	defer p.wg.Done()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client, server) {
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	<-done
	// One direction ended: end the connection as a whole, so the other copy returns too.
	p.untrack(client, server)
	<-done
}

func (p *Proxy) track(client, server net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = client.Close()
		_ = server.Close()
		return false
	}
	p.conns[client] = struct{}{}
	p.conns[server] = struct{}{}
	return true
}

func (p *Proxy) untrack(client, server net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, client)
	delete(p.conns, server)
	_ = client.Close()
	_ = server.Close()
}
