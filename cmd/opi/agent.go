package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// agentBinary is the node agent's own binary (cmd/opi-agent), shipped next to opi in the image:
// it links only what the agent needs, so a node pays for a small process.
const agentBinary = "opi-agent"

// execAgent is `opi agent`, an alias of opi-agent: it replaces this process with the opi-agent
// binary next to opi's (else the one on PATH), with the same arguments.
func execAgent(args []string) {
	path, err := agentPath()
	if err != nil {
		fmt.Fprintf(os.Stderr, "opi agent: the node agent is the %s binary, not found next to opi nor on PATH: %v\n", agentBinary, err)
		os.Exit(2)
	}
	err = syscall.Exec(path, append([]string{path}, args...), os.Environ())
	fmt.Fprintf(os.Stderr, "opi agent: exec %s: %v\n", path, err)
	os.Exit(1)
}

func agentPath() (string, error) {
	if self, err := os.Executable(); err == nil {
		next := filepath.Join(filepath.Dir(self), agentBinary)
		if info, err := os.Stat(next); err == nil && !info.IsDir() {
			return next, nil
		}
	}
	path, err := exec.LookPath(agentBinary)
	if errors.Is(err, exec.ErrDot) {
		return "", err
	}
	return path, err
}
