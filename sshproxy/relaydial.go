package sshproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"time"
)

// The relay subcommands of opi's binary: `opi relay idle` keeps the relay container up, and
// `opi relay dial [--timeout D] -- HOST PORT` is one tunnel, exec'd into it.
const (
	RelayCommand = "relay"
	RelayIdle    = "idle"
	RelayDial    = "dial"
)

// relayLinePrefix starts every line the dial subcommand writes on stderr.
const relayLinePrefix = "opi-relay: "

// RelayReady is the dial subcommand's first line on stderr once it connected: after it, stdin
// and stdout are the connection's bytes. Any other first line says why it could not connect.
const RelayReady = relayLinePrefix + "connected"

// hostName is a DNS name (labels of letters, digits, '-' and '_', a trailing dot allowed).
var hostName = regexp.MustCompile(`^[A-Za-z0-9_]([A-Za-z0-9_-]{0,62})(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,62}))*\.?$`)

// CheckRelayTarget says whether host and port are an address a tunnel may dial: an IP or a DNS
// name, and a port of 1 to 65535.
func CheckRelayTarget(host string, port int) error {
	if port < 1 || port > 65535 {
		return fmt.Errorf("port %d is not between 1 and 65535", port)
	}
	if net.ParseIP(host) != nil {
		return nil
	}
	if len(host) > 253 || !hostName.MatchString(host) {
		return fmt.Errorf("%q is neither an IP address nor a host name", truncate(host, 120))
	}
	return nil
}

// RelayDialFor is `opi relay dial`: it dials host:port within timeout and copies stdin to the
// connection and the connection to stdout until the far host ends it. stderr gets RelayReady
// once connected, else why not (and the error is returned).
func RelayDialFor(ctx context.Context, host, port string, timeout time.Duration, stdin io.Reader, stdout, stderr io.Writer) error {
	n, err := strconv.Atoi(port)
	if err == nil {
		err = CheckRelayTarget(host, n)
	} else {
		err = fmt.Errorf("port %q is not a number", truncate(port, 20))
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s%v\n", relayLinePrefix, err)
		return err
	}
	addr := net.JoinHostPort(host, port)
	dialer := net.Dialer{Timeout: timeout}
	conn, err := dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		// The proxy names the address and the instance; the reason is what it lacks.
		fmt.Fprintf(stderr, "%s%v\n", relayLinePrefix, unwrapDial(err))
		return fmt.Errorf("dialling %s: %w", addr, err)
	}
	defer conn.Close()
	fmt.Fprintln(stderr, RelayReady)
	tcp, _ := conn.(*net.TCPConn)
	go func() {
		_, _ = io.Copy(conn, stdin)
		// The client's EOF is the far host's.
		if tcp != nil {
			_ = tcp.CloseWrite()
		}
	}()
	done := make(chan error, 1)
	go func() {
		_, err := io.Copy(stdout, conn)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return nil
	}
}

// unwrapDial is a dial error without its "dial tcp ADDR:" prefix, which the message already
// says.
func unwrapDial(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}
