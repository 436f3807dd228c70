package sshproxy

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
)

// DefaultSFTPServerPaths are where images usually keep OpenSSH's sftp-server (Debian and
// Ubuntu, Fedora and RHEL, SUSE, Alpine and Arch, BSD-style prefixes).
var DefaultSFTPServerPaths = []string{
	"/usr/lib/openssh/sftp-server",
	"/usr/libexec/openssh/sftp-server",
	"/usr/lib/ssh/sftp-server",
	"/usr/lib/sftp-server",
	"/usr/libexec/sftp-server",
	"/usr/local/libexec/sftp-server",
	"/usr/lib64/misc/sftp-server",
}

// sftpSubsystem is the one subsystem the proxy serves: what sftp and modern scp ask for.
const sftpSubsystem = "sftp"

// probeMark starts the line a file transfer's probe writes on stderr once it found its
// program, just before it runs it: the proxy answers the request then, and drops the line.
const probeMark = "opi-ssh-proxy-probe-found"

// sftpScript runs the first of its arguments that is an executable: the probe of the
// sftp-server paths, in the same one exec that then serves the protocol.
const sftpScript = `for p in "$@"; do if [ -x "$p" ]; then printf '` + probeMark + ` %s\n' "$p" >&2; exec "$p"; fi; done; exit 127`

// scpScript runs legacy scp's remote end ("$1", e.g. `scp -t dir`) as any command is run
// (bash, else sh), once the probe found an scp on the PATH that command will search.
var scpScript = `if p=$(command -v scp); then printf '` + probeMark + ` %s\n' "$p" >&2; ` +
	fmt.Sprintf(shellScript, `-c "$1"`) + `; fi; exit 127`

// transfer is a file transfer's program, which the instance's image may lack.
type transfer struct {
	// name is what the user asked for, in the proxy's messages.
	name string
	// command runs it, probing for it first.
	command []string
	// missing is the refusal when the probe finds nothing.
	missing string
}

// sftpTransfer is the sftp subsystem through the first of paths the image has.
func sftpTransfer(paths []string, index int32) *transfer {
	return &transfer{
		name:    "sftp",
		command: append([]string{"/bin/sh", "-c", sftpScript, "sh"}, paths...),
		missing: fmt.Sprintf("sftp (and scp, which uses it) is not available in instance %d: the image has no sftp-server (looked for %s)", index, strings.Join(paths, ", ")),
	}
}

// scpTransfer is legacy scp's remote end (scp -O), when command is one.
func scpTransfer(command string, index int32) (*transfer, bool) {
	if !isLegacySCP(command) {
		return nil, false
	}
	return &transfer{
		name:    "scp",
		command: []string{"/bin/sh", "-c", scpScript, "sh", command},
		missing: fmt.Sprintf("legacy scp (scp -O) is not available in instance %d: the image has no scp command", index),
	}, true
}

// isLegacySCP says whether command is the remote end legacy scp asks for: scp with -t (to
// the instance) or -f (from it) among its options, as OpenSSH's scp -O sends it.
func isLegacySCP(command string) bool {
	fields := strings.Fields(command)
	if len(fields) < 2 || fields[0] != "scp" {
		return false
	}
	for _, f := range fields[1:] {
		if f == "--" || !strings.HasPrefix(f, "-") {
			return false
		}
		if strings.ContainsAny(f[1:], "tf") {
			return true
		}
	}
	return false
}

// maxProbeLine bounds what the probe gate holds back while it looks for the probe's line.
const maxProbeLine = 4096

// probeGate passes a command's stderr on to w, except the probe's line, which it drops:
// found is closed then, and path is the program found.
type probeGate struct {
	w     io.Writer
	found chan struct{}

	mu      sync.Mutex
	line    []byte
	decided bool
	path    string
}

func newProbeGate(w io.Writer) *probeGate {
	return &probeGate{w: w, found: make(chan struct{})}
}

func (g *probeGate) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.decided {
		return g.w.Write(p)
	}
	i := bytes.IndexByte(p, '\n')
	if i < 0 && len(g.line)+len(p) <= maxProbeLine {
		g.line = append(g.line, p...)
		return len(p), nil
	}
	g.decided = true
	if i < 0 {
		// Not the probe's line, which is short: the command's own output.
		_, err := g.w.Write(append(g.line, p...))
		return len(p), err
	}
	line := append(g.line, p[:i]...)
	if path, ok := strings.CutPrefix(string(line), probeMark+" "); ok {
		g.path = path
		close(g.found)
		if rest := p[i+1:]; len(rest) > 0 {
			if _, err := g.w.Write(rest); err != nil {
				return len(p), err
			}
		}
		return len(p), nil
	}
	_, err := g.w.Write(append(line, p[i:]...))
	return len(p), err
}

// flush passes on what the gate still holds once the command ended.
func (g *probeGate) flush() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.decided && len(g.line) > 0 {
		_, _ = g.w.Write(g.line)
	}
	g.decided = true
}

// isFound says whether the probe found its program.
func (g *probeGate) isFound() bool {
	select {
	case <-g.found:
		return true
	default:
		return false
	}
}

// inputEnd is a session's stdin that says when the client ended it.
type inputEnd struct {
	r    io.Reader
	once sync.Once
	done chan struct{}
}

func newInputEnd(r io.Reader) *inputEnd { return &inputEnd{r: r, done: make(chan struct{})} }

func (e *inputEnd) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		e.once.Do(func() { close(e.done) })
	}
	return n, err
}
