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
			if ok, later := se.request(ctx, req, &started); !later && req.WantReply {
				_ = req.Reply(ok, nil)
			}
		}
	}
}

// request handles one channel request and says whether it was granted, or that the answer
// comes later (a file transfer's, once its program was found or not).
func (se *session) request(ctx context.Context, req *ssh.Request, started *bool) (ok, later bool) {
	switch req.Type {
	case "pty-req":
		var p ptyRequest
		if *started || ssh.Unmarshal(req.Payload, &p) != nil {
			return false, false
		}
		se.pty = &p
		se.sizes.push(p.Columns, p.Rows)
		return true, false
	case "window-change":
		var w windowChange
		if ssh.Unmarshal(req.Payload, &w) == nil {
			se.sizes.push(w.Columns, w.Rows)
		}
		return true, false
	case "shell", "exec":
		if *started {
			return false, false
		}
		var command string
		if req.Type == "exec" {
			var e struct{ Command string }
			if ssh.Unmarshal(req.Payload, &e) != nil {
				return false, false
			}
			command = e.Command
		}
		*started = true
		if t, ok := scpTransfer(command, se.g.index); ok {
			return se.startTransfer(ctx, req, t)
		}
		go se.run(ctx, launch{kind: req.Type, command: shellCommand(command), tty: se.pty != nil})
		return true, false
	case "subsystem":
		var sub struct{ Name string }
		if *started || ssh.Unmarshal(req.Payload, &sub) != nil {
			return false, false
		}
		if sub.Name != sftpSubsystem {
			se.tell(false, fmt.Sprintf("the %q subsystem is not served, only %q", truncate(sub.Name, 64), sftpSubsystem))
			se.settle()
			return false, false
		}
		*started = true
		return se.startTransfer(ctx, req, sftpTransfer(se.s.o.SFTPServerPaths, se.g.index))
	default:
		// env, signal, agent forwarding, x11: refused.
		return false, false
	}
}

// startTransfer runs a file transfer for req, which it answers later, once (request's result).
func (se *session) startTransfer(ctx context.Context, req *ssh.Request, t *transfer) (ok, later bool) {
	var once sync.Once
	reply := func(ok bool) {
		once.Do(func() {
			if req.WantReply {
				_ = req.Reply(ok, nil)
			}
		})
	}
	go se.run(ctx, launch{kind: req.Type, command: t.command, transfer: t, reply: reply})
	return false, true
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

// launch is what a session runs.
type launch struct {
	// kind is the request's type (shell, exec, subsystem).
	kind    string
	command []string
	tty     bool
	// transfer, when set, is the file transfer command runs: its request is answered by
	// reply, once the probe found the program, or refused when the command ended without.
	transfer *transfer
	reply    func(ok bool)
}

// run runs the session's command in the pod and returns its exit status to the client. The
// command ends with the channel, the connection, or the instance; a file transfer's also after
// the client ended its input (endAfterInput).
func (se *session) run(ctx context.Context, l launch) {
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

	req := ExecRequest{Pod: se.g.pod.name, Command: l.command, Stdin: se.ch, Stdout: se.ch, TTY: l.tty}
	if l.tty {
		req.Sizes = se.sizes
	} else {
		req.Stderr = se.ch.Stderr()
	}
	var gate *probeGate
	ended := &atomic.Bool{}
	if l.transfer != nil {
		gate = newProbeGate(se.ch.Stderr())
		req.Stderr = gate
		in := newInputEnd(se.ch)
		req.Stdin = in
		ended = se.endAfterInput(ctx, in, cancel)
		go func() {
			select {
			case <-gate.found:
				se.logger.Info("transfer-started", lager.Data{"transfer": l.transfer.name, "program": gate.path})
				l.reply(true)
			case <-ctx.Done():
			}
		}()
	}
	se.logger.Info("exec", lager.Data{"kind": l.kind, "tty": l.tty})
	err := se.s.d.Executor.Exec(ctx, req)

	if gate != nil {
		gate.flush()
		if !gate.isFound() {
			se.refuseTransfer(ctx, l, gone.Load(), err)
			return
		}
		// The answer precedes the exit status, even when the command ended at once.
		l.reply(true)
	}
	status := uint32(0)
	var exit interface{ ExitStatus() int }
	switch {
	case err == nil:
	case ended.Load():
		// The transfer was complete: the client had ended it.
	case errors.As(err, &exit):
		status = uint32(exit.ExitStatus())
	default:
		status = exitStatusFailed
		message := fmt.Sprintf("the session with instance %d failed: %v", se.g.index, err)
		if gone.Load() {
			message = se.stopped()
		} else if ctx.Err() != nil {
			// The client left: nobody reads a message or a status.
			return
		}
		se.logger.Info("exec-ended", lager.Data{"reason": message})
		se.tell(l.tty, message)
	}
	_ = se.ch.CloseWrite()
	_, _ = se.ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
}

// stopped is the message of a session whose instance went away.
func (se *session) stopped() string {
	return fmt.Sprintf("instance %d has stopped; the session ends", se.g.index)
}

// refuseTransfer refuses a file transfer whose program was not found: the reason on stderr,
// then the request's failure. The probe's command cannot tell "not found" (exit 127) apart
// from other failures through every runtime (kwok passes no exit code), so the log keeps err.
func (se *session) refuseTransfer(ctx context.Context, l launch, gone bool, err error) {
	message := l.transfer.missing
	switch {
	case gone:
		message = se.stopped()
	case ctx.Err() != nil:
		l.reply(false)
		return
	}
	data := lager.Data{"transfer": l.transfer.name, "reason": message}
	if err != nil {
		data["error"] = err.Error()
	}
	se.logger.Info("transfer-refused", data)
	se.tell(false, message)
	se.settle()
	l.reply(false)
}

// settle returns once the client has taken what the channel carried so far: its answer to a
// keepalive comes after that. OpenSSH drops what it has not yet written out of a channel whose
// subsystem or exec request failed, and the proxy's reason would go with it.
func (se *session) settle() {
	_, _ = se.ch.SendRequest("keepalive@openssh.com", true, nil)
}

// endAfterInput ends a file transfer's command (cancel) when it runs on for InputEndGrace after
// the client ended its input: the protocols carry nothing after that end (sftp-server and scp's
// sink stop on it), and a command whose stdin the runtime never closes would hold the session
// and the client's scp or sftp. The flag says it did.
func (se *session) endAfterInput(ctx context.Context, in *inputEnd, cancel context.CancelFunc) *atomic.Bool {
	ended := &atomic.Bool{}
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-in.done:
		}
		t := time.NewTimer(se.s.o.InputEndGrace)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
			ended.Store(true)
			cancel()
		}
	}()
	return ended
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
