package sshproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"golang.org/x/crypto/ssh"
	"k8s.io/client-go/tools/remotecommand"
)

// Executor runs a command in a container of a pod (pods/exec).
//
//counterfeiter:generate . Executor
type Executor interface {
	// Exec streams until the command ends; a command that exits non-zero returns an error with
	// ExitStatus() int (k8s.io/client-go/util/exec.ExitError).
	Exec(ctx context.Context, req ExecRequest) error
}

// ExecRequest is one command in one pod.
type ExecRequest struct {
	Pod string
	// Container is the container the command runs in; empty: the app's.
	Container string
	Command   []string
	// Stdin is streamed to the command; its EOF closes the command's stdin.
	Stdin io.Reader
	// Stdout and Stderr receive the command's output; with TTY Stderr is nil (a terminal has
	// one stream).
	Stdout, Stderr io.Writer
	TTY            bool
	// Sizes are the terminal's sizes, the first at once (TTY only).
	Sizes remotecommand.TerminalSizeQueue
}

// exitStatusFailed is the exit status of a session the proxy ended, not its command (as
// OpenSSH's own failures).
const exitStatusFailed = 255

// session is one session channel: at most one shell or exec, with its pty and window sizes.
type session struct {
	s      *Server
	g      *grant
	ch     ssh.Channel
	logger lager.Logger

	pty   *ptyRequest
	sizes *sizeQueue
	once  sync.Once
	done  chan struct{}
}

func newSession(s *Server, g *grant, ch ssh.Channel, logger lager.Logger) *session {
	return &session{s: s, g: g, ch: ch, logger: logger, sizes: newSizeQueue(), done: make(chan struct{})}
}

// ptyRequest is RFC 4254's "pty-req" payload.
type ptyRequest struct {
	Term                                    string
	Columns, Rows, WidthPixels, HeightPixel uint32
	Modes                                   string
}

// windowChange is RFC 4254's "window-change" payload.
type windowChange struct {
	Columns, Rows, WidthPixels, HeightPixels uint32
}

// serve answers the channel's requests until it closes; a shell or exec runs its command.
func (se *session) serve(ctx context.Context, reqs <-chan *ssh.Request) {
	defer se.ch.Close()
	defer se.sizes.close()
	started := false
	for {
		select {
		case <-se.done:
			return
		case req, ok := <-reqs:
			if !ok {
				// The client closed the channel: a running command is ended through ctx.
				se.finish()
				<-se.done
				return
			}
			ok = se.request(ctx, req, &started)
			if req.WantReply {
				_ = req.Reply(ok, nil)
			}
		}
	}
}

// request handles one channel request and says whether it was granted.
func (se *session) request(ctx context.Context, req *ssh.Request, started *bool) bool {
	switch req.Type {
	case "pty-req":
		var p ptyRequest
		if *started || ssh.Unmarshal(req.Payload, &p) != nil {
			return false
		}
		se.pty = &p
		se.sizes.push(p.Columns, p.Rows)
		return true
	case "window-change":
		var w windowChange
		if ssh.Unmarshal(req.Payload, &w) == nil {
			se.sizes.push(w.Columns, w.Rows)
		}
		return true
	case "shell", "exec":
		if *started {
			return false
		}
		var command string
		if req.Type == "exec" {
			var e struct{ Command string }
			if ssh.Unmarshal(req.Payload, &e) != nil {
				return false
			}
			command = e.Command
		}
		*started = true
		go se.run(ctx, req.Type, command)
		return true
	default:
		// env, subsystem (sftp: not yet), signal, agent forwarding, x11: refused.
		return false
	}
}

// finish ends a session whose command never started.
func (se *session) finish() { se.once.Do(func() { close(se.done) }) }

// shellScript runs bash where the image has it, else sh, in one exec (as Diego's sshd chooses);
// with a command, "$1" is it.
const shellScript = `for sh in /bin/bash /usr/local/bin/bash; do if [ -x "$sh" ]; then exec "$sh" %[1]s; fi; done; exec /bin/sh %[1]s`

// shellCommand is the exec's command for a shell (command "") or a command.
func shellCommand(command string) []string {
	if command == "" {
		return []string{"/bin/sh", "-c", fmt.Sprintf(shellScript, "")}
	}
	return []string{"/bin/sh", "-c", fmt.Sprintf(shellScript, `-c "$1"`), "sh", command}
}

// run runs the session's command in the pod and returns its exit status to the client. The
// command ends with the channel, the connection, or the instance.
func (se *session) run(ctx context.Context, kind, command string) {
	defer se.finish()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-se.done:
		case <-ctx.Done():
		}
		cancel()
	}()
	gone := se.watchInstance(ctx, cancel)

	tty := se.pty != nil
	req := ExecRequest{Pod: se.g.pod.name, Command: shellCommand(command), Stdin: se.ch, Stdout: se.ch, TTY: tty}
	if tty {
		req.Sizes = se.sizes
	} else {
		req.Stderr = se.ch.Stderr()
	}
	se.logger.Info("exec", lager.Data{"kind": kind, "tty": tty})
	err := se.s.d.Executor.Exec(ctx, req)

	status := uint32(0)
	var exit interface{ ExitStatus() int }
	switch {
	case err == nil:
	case errors.As(err, &exit):
		status = uint32(exit.ExitStatus())
	default:
		status = exitStatusFailed
		message := fmt.Sprintf("the session with instance %d failed: %v", se.g.index, err)
		if gone.Load() {
			message = fmt.Sprintf("instance %d has stopped; the session ends", se.g.index)
		} else if ctx.Err() != nil {
			// The client left: nobody reads a message or a status.
			return
		}
		se.logger.Info("exec-ended", lager.Data{"reason": message})
		se.tell(tty, message)
	}
	_ = se.ch.CloseWrite()
	_, _ = se.ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
}

// tell writes the proxy's own message to the user: on stderr, or the terminal.
func (se *session) tell(tty bool, message string) {
	var w io.Writer = se.ch.Stderr()
	if tty {
		w = se.ch
	}
	_, _ = fmt.Fprintf(w, "opi ssh-proxy: %s\r\n", message)
}

// watchInstance ends the session (cancel) once its pod is no longer a live instance: gone,
// replaced, terminating or ended for good. The flag says it did.
func (se *session) watchInstance(ctx context.Context, cancel context.CancelFunc) *atomic.Bool {
	gone := &atomic.Bool{}
	go func() {
		t := time.NewTicker(se.s.o.InstanceCheckPeriod)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p, ok := se.s.d.Instances.Pod(se.g.pod.name)
				if !ok || string(p.UID) != se.g.pod.uid || p.DeletionTimestamp != nil || p.Terminal {
					gone.Store(true)
					cancel()
					return
				}
			}
		}
	}()
	return gone
}

// sizeQueue hands the terminal's sizes to the exec (remotecommand.TerminalSizeQueue): the latest
// one not yet taken, so a burst of window changes never blocks the channel's requests.
type sizeQueue struct {
	ch     chan remotecommand.TerminalSize
	closed chan struct{}
	once   sync.Once
}

func newSizeQueue() *sizeQueue {
	return &sizeQueue{ch: make(chan remotecommand.TerminalSize, 1), closed: make(chan struct{})}
}

func (q *sizeQueue) push(cols, rows uint32) {
	size := remotecommand.TerminalSize{Width: uint16(min(cols, 0xffff)), Height: uint16(min(rows, 0xffff))}
	for {
		select {
		case q.ch <- size:
			return
		default:
		}
		select {
		case <-q.ch: // drop the older size
		default:
		}
	}
}

// Next is the next size, nil once the session ended.
func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	select {
	case s := <-q.ch:
		return &s
	case <-q.closed:
		return nil
	}
}

func (q *sizeQueue) close() { q.once.Do(func() { close(q.closed) }) }
