package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/opi-bridge/opi/sshproxy"
)

const relayUsage = `usage: opi relay idle
       opi relay dial [--timeout 10s] -- HOST PORT

The SSH proxy's relay, in an instance's pod: "idle" keeps its ephemeral container up; "dial"
is one tunnel, exec'd into it: it connects to HOST:PORT from the pod and carries stdin and
stdout.
`

// mainRelay is `opi relay`, which the SSH proxy runs in an instance's pod for tunnels to other
// hosts.
func mainRelay(args []string) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(runRelay(ctx, args, os.Stdin, os.Stdout, os.Stderr))
}

// runRelay runs `opi relay` with args and returns its exit code.
func runRelay(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, relayUsage)
		return 2
	}
	switch args[0] {
	case sshproxy.RelayIdle:
		if len(args) != 1 {
			fmt.Fprint(stderr, relayUsage)
			return 2
		}
		// Nothing to do but be there for the dials; the pod's end stops it.
		<-ctx.Done()
		return 0
	case sshproxy.RelayDial:
		fs := flag.NewFlagSet("opi relay dial", flag.ContinueOnError)
		fs.SetOutput(stderr)
		timeout := fs.Duration("timeout", sshproxy.DefaultRelayDialTimeout, "how long the dial may take")
		if err := fs.Parse(args[1:]); err != nil {
			return 2
		}
		if fs.NArg() != 2 || *timeout <= 0 || *timeout > time.Minute {
			fmt.Fprint(stderr, relayUsage)
			return 2
		}
		if err := sshproxy.RelayDialFor(ctx, fs.Arg(0), fs.Arg(1), *timeout, stdin, stdout, stderr); err != nil {
			return 1
		}
		return 0
	default:
		fmt.Fprint(stderr, relayUsage)
		return 2
	}
}
