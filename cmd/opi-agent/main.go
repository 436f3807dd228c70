// Command opi-agent is opi's node agent (docs/logging.md): it ships the logs and container
// metrics of the app pods on its node to Loggregator. It is a binary of its own, in the same
// image as opi (`opi agent` execs it), so that what runs on every node links only what the
// agent needs: no typed clientset, only REST clients of the three API groups it lists and
// watches (kube.go).
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/opi-bridge/opi/cmd/internal/cli"
)

func main() {
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Println("opi-agent " + buildVersion)
		return
	}
	if os.Getenv("GOGC") == "" {
		// Most of the agent's heap is short-lived (a line's envelope, until it is delivered):
		// a lower GC target keeps a node's agent near its live heap instead of up to twice it,
		// for some more CPU per line. GOGC overrides it.
		debug.SetGCPercent(defaultGCPercent)
	}
	cli.RunSubcommand("opi-agent", os.Args[1:], parseAgentFlags, runAgent)
}

// defaultGCPercent is the agent's GOGC unless the environment sets one.
const defaultGCPercent = 50

// buildVersion is set at build time (-X main.buildVersion=...).
var buildVersion = "devel"
