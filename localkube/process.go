package localkube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// stopTimeout is how long a process gets to exit after SIGTERM before it is killed.
const stopTimeout = 10 * time.Second

// process is one child of the Go process: a control plane component, or opi itself.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string // empty when the output goes to a caller's writer
	// showLog says whether errors may point at logPath: not when the file is removed with the
	// cluster's folder before anyone can read it.
	showLog bool
	logFile *os.File
	tail    *tailBuffer
	done    chan struct{} // closed once the process has exited and been reaped
	err     error         // the result of Wait, valid after done is closed
}

// Pdeathsig is delivered when the thread that forked the child exits, not the process. Go may
// retire a thread when a goroutine locked to it ends, so children are forked from one goroutine
// that locks its thread for the life of the program: then the signal fires only when the Go
// process itself dies.
var (
	forkOnce sync.Once
	forkReq  chan func()
)

func onForkThread(f func()) {
	forkOnce.Do(func() {
		forkReq = make(chan func())
		go func() {
			runtime.LockOSThread()
			for g := range forkReq {
				g()
			}
		}()
	})
	done := make(chan struct{})
	forkReq <- func() { f(); close(done) }
	<-done
}

// StartProcess starts bin with args as a child that cannot outlive the Go process: it has its own
// process group (so a terminal's Ctrl-C reaches only us, and we decide the stop order) and is
// killed by the kernel if the Go process dies. Output goes to out, or when out is nil to logPath.
func StartProcess(name, bin string, args, env []string, out io.Writer, logPath string) (*Process, error) {
	p, err := startProcess(name, bin, args, env, out, logPath)
	if err != nil {
		return nil, err
	}
	p.showLog = true
	return &Process{p: p}, nil
}

func startProcess(name, bin string, args, env []string, out io.Writer, logPath string) (*process, error) {
	p := &process{name: name, tail: newTailBuffer(16 << 10), done: make(chan struct{})}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = time.Second
	if out == nil {
		f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("opening the %s log: %w", name, err)
		}
		p.logFile, p.logPath = f, logPath
		out = f
	} else {
		out = &prefixWriter{w: out, prefix: "[" + name + "] "}
	}
	w := io.MultiWriter(out, p.tail)
	cmd.Stdout, cmd.Stderr = w, w
	p.cmd = cmd

	var startErr error
	onForkThread(func() { startErr = cmd.Start() })
	if startErr != nil {
		if p.logFile != nil {
			p.logFile.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", name, startErr)
	}
	go func() {
		p.err = cmd.Wait()
		if p.logFile != nil {
			p.logFile.Close()
		}
		close(p.done)
	}()
	return p, nil
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, waits up to timeout, then sends SIGKILL. It is safe to
// call on a process that has already exited.
func (p *process) stop(timeout time.Duration) error {
	if p.exited() {
		return nil
	}
	pgid := p.pid() // Setpgid makes the group id the child's pid
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("sending SIGTERM to %s (pid %d): %w", p.name, pgid, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("sending SIGKILL to %s (pid %d): %w", p.name, pgid, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, pgid)
	}
}

// describe says where the process's output is and how it ended, with its last lines, for errors.
func (p *process) describe() string {
	var b strings.Builder
	if p.exited() {
		fmt.Fprintf(&b, "%s exited (%v)", p.name, p.err)
	} else {
		fmt.Fprintf(&b, "%s is running (pid %d)", p.name, p.pid())
	}
	if p.logPath != "" && p.showLog {
		fmt.Fprintf(&b, "; log %s", p.logPath)
	}
	fmt.Fprintf(&b, "; last lines of its output:\n%s", p.tail.lastLines(25))
	return b.String()
}

// Process is a child process started with StartProcess.
type Process struct{ p *process }

// Pid is the process id (also its process group id).
func (p *Process) Pid() int { return p.p.pid() }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.p.done }

// Err is how the process ended; valid after Done is closed.
func (p *Process) Err() error { return p.p.err }

// Stop sends SIGTERM to the process group, waits up to 10 s, then SIGKILLs it.
func (p *Process) Stop() error { return p.p.stop(stopTimeout) }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(b), nil
}

func (t *tailBuffer) lastLines(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := bytes.Split(bytes.TrimRight(t.buf, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + string(bytes.Join(lines, []byte("\n  ")))
}

// prefixWriter tags each line with the process name, so several processes can share one writer.
// Writes from all processes to the same underlying writer are serialised by one lock.
type prefixWriter struct {
	w       io.Writer
	prefix  string
	partial []byte
}

var sharedWriteMu sync.Mutex

func (p *prefixWriter) Write(b []byte) (int, error) {
	sharedWriteMu.Lock()
	defer sharedWriteMu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		line := append([]byte(p.prefix), p.partial[:i+1]...)
		if _, err := p.w.Write(line); err != nil {
			return len(b), nil // a broken log writer must not kill the process by blocking it
		}
		p.partial = p.partial[i+1:]
	}
	return len(b), nil
}

// WaitHTTP polls url every 200 ms until it answers 200 OK. It fails when the process exits
// first, when ctx ends or when timeout passes, saying which and the last answer.
func (p *Process) WaitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	last := "no answer"
	errExited := errors.New("the process exited")
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		if resp, err := client.Do(req); err != nil {
			last = err.Error()
		} else {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true, nil
			}
			last = resp.Status
		}
		select {
		case <-p.Done():
			return false, errExited
		default:
			return false, nil
		}
	})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errExited):
		return fmt.Errorf("the process exited (%v)", p.Err())
	case ctx.Err() != nil || wait.Interrupted(err):
		return fmt.Errorf("%w (last answer: %s)", err, last)
	default:
		return err
	}
}
