package main

import (
	"fmt"
	"io"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/opi-bridge/opi/testsupport/natsserver"
)

// natsPrefix starts each line printNATS prints, as "cc-standin:" starts the stand-in's.
const natsPrefix = "nats:"

// routerSubjects are the subjects of gorouter's protocol (router.register, router.unregister,
// router.greet, router.start): what a foundation's gorouters subscribe to.
const routerSubjects = "router.*"

// localNATS is what `make run --routing nats` starts beside the control plane in place of a
// foundation's NATS and gorouters: a NATS server on loopback (in this process), and a
// subscription to router.* that prints every message opi sends with a "nats:" prefix.
type localNATS struct {
	server *natsserver.Server
	conn   *nats.Conn
}

// startNATS starts the server and subscribes to router.*, printing each message to out.
func startNATS(out io.Writer) (*localNATS, error) {
	server, err := natsserver.Start(natsserver.Options{})
	if err != nil {
		return nil, fmt.Errorf("starting the nats server: %w", err)
	}
	l := &localNATS{server: server}
	if l.conn, err = nats.Connect(server.URL(), nats.Name("opi-local")); err != nil {
		return l, fmt.Errorf("subscribing to the nats server: %w", err)
	}
	var mu sync.Mutex // one message, one line
	if _, err := l.conn.Subscribe(routerSubjects, func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		printNATS(out, m.Subject, m.Data)
	}); err != nil {
		return l, fmt.Errorf("subscribing to %s: %w", routerSubjects, err)
	}
	// The subscription is in place before opi connects: no message is missed.
	if err := l.conn.Flush(); err != nil {
		return l, fmt.Errorf("subscribing to %s: %w", routerSubjects, err)
	}
	fmt.Fprintf(out, "nats server at %s\n", server.URL())
	return l, nil
}

// printNATS prints one message: the prefix, its subject and its body.
func printNATS(out io.Writer, subject string, body []byte) {
	fmt.Fprintf(out, "%s %s %s\n", natsPrefix, subject, body)
}

// URL is the server's nats://127.0.0.1:<port>.
func (l *localNATS) URL() string { return l.server.URL() }

// OpiArgs are opi's flags for routing through this server.
func (l *localNATS) OpiArgs() []string {
	return []string{"--routing", "nats", "--nats-url", l.server.URL()}
}

func (l *localNATS) close() error {
	if l.conn != nil {
		l.conn.Close()
	}
	l.server.Shutdown()
	return nil
}
