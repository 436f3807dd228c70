package main

import "github.com/opi-bridge/opi/cmd/internal/cli"

// defaultAgentOpsListen is `opi agent --ops-listen`'s default: the DaemonSet's probes and
// Prometheus reach it on the pod's address.
const defaultAgentOpsListen = ":8090"

// startAgentOps serves the ops endpoint (the commands' shared one).
var startAgentOps = cli.StartOps
