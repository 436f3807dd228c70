package sshproxy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/opi-bridge/opi/sshproxy"
)

// The probe scripts as the proxy runs them: they are the contract with the image.
const (
	sftpProbe = `for p in "$@"; do if [ -x "$p" ]; then printf 'opi-ssh-proxy-probe-found %s\n' "$p" >&2; exec "$p"; fi; done; exit 127`
	scpProbe  = `if p=$(command -v scp); then printf 'opi-ssh-proxy-probe-found %s\n' "$p" >&2; ` +
		`for sh in /bin/bash /usr/local/bin/bash; do if [ -x "$sh" ]; then exec "$sh" -c "$1"; fi; done; exec /bin/sh -c "$1"; fi; exit 127`
)

// found is what a probe writes on stderr when it found its program at path.
func found(path string) string { return "opi-ssh-proxy-probe-found " + path + "\n" }

// serveProgram is an executor whose probe finds path (in pieces, as a stream may cut it), then
// echoes stdin upper-cased and writes errOut, until stdin ends; then it returns err.
func serveProgram(path, errOut string, err error) func(context.Context, sshproxy.ExecRequest) error {
	return func(_ context.Context, req sshproxy.ExecRequest) error {
		line := found(path)
		_, _ = io.WriteString(req.Stderr, line[:5])
		_, _ = io.WriteString(req.Stderr, line[5:]+errOut)
		in, readErr := io.ReadAll(req.Stdin)
		if readErr != nil {
			return readErr
		}
		_, _ = req.Stdout.Write(bytes.ToUpper(in))
		return err
	}
}

// errNotFound is a probe's end when it found nothing: exit 127, as kwok reports it (no code).
var errNotFound = errors.New("command terminated with non-zero exit code: exit status 127")

// notFound is an executor whose probe finds nothing.
func notFound(context.Context, sshproxy.ExecRequest) error { return errNotFound }

var _ = Describe("File transfers: sftp and legacy scp", func() {
	var (
		st *standIns
		p  *proxy
	)

	beforeEachProxy(&st, &p)

	// transfer opens a session channel, asks for the subsystem or the exec, and when granted
	// sends input and ends it; it returns what the client saw.
	type result struct {
		granted        bool
		stdout, stderr string
		// status is the exit-status sent, nil when none was.
		status *uint32
		// settledFirst says the proxy's keepalive was answered before the request's answer came.
		settledFirst bool
	}
	transfer := func(reqType, arg, input string) result {
		GinkgoHelper()
		ch, reqs, err := p.connect().OpenChannel("session", nil)
		Expect(err).NotTo(HaveOccurred())
		statuses := make(chan uint32, 1)
		var settled atomic.Bool
		go func() {
			defer close(statuses)
			for req := range reqs {
				var exit struct{ Status uint32 }
				if req.Type == "exit-status" && ssh.Unmarshal(req.Payload, &exit) == nil {
					statuses <- exit.Status
				}
				if req.WantReply {
					// As OpenSSH answers what it does not know (the proxy's keepalives).
					settled.Store(req.Type == "keepalive@openssh.com")
					_ = req.Reply(false, nil)
				}
			}
		}()
		errOut := make(chan []byte, 1)
		go func() { b, _ := io.ReadAll(ch.Stderr()); errOut <- b }()

		var r result
		r.granted, err = ch.SendRequest(reqType, true, ssh.Marshal(struct{ Arg string }{arg}))
		Expect(err).NotTo(HaveOccurred())
		r.settledFirst = settled.Load()
		if r.granted {
			// A command that ended at once has closed the channel: the input has nowhere to go.
			_, _ = io.WriteString(ch, input)
			_ = ch.CloseWrite()
		}
		out, err := io.ReadAll(ch)
		Expect(err).NotTo(HaveOccurred())
		r.stdout = string(out)
		var errBytes []byte
		Eventually(errOut).Should(Receive(&errBytes))
		r.stderr = string(errBytes)
		if status, ok := <-statuses; ok {
			r.status = &status
		}
		return r
	}
	sftp := func(input string) result { return transfer("subsystem", "sftp", input) }
	exec := func(command, input string) result { return transfer("exec", command, input) }

	Describe("the sftp subsystem", func() {
		It("runs the first sftp-server of the usual paths the image has, over the exec's stdin and stdout", func() {
			p.executor.ExecStub = serveProgram("/usr/lib/openssh/sftp-server", "a log line\n", nil)
			r := sftp("sftp packets")
			Expect(r.granted).To(BeTrue())
			Expect(r.stdout).To(Equal("SFTP PACKETS"))
			Expect(r.stderr).To(Equal("a log line\n"), "the probe's line is the proxy's, not the user's")
			Expect(r.status).To(HaveValue(BeZero()))

			Expect(p.executor.ExecCallCount()).To(Equal(1))
			_, req := p.executor.ExecArgsForCall(0)
			Expect(req.Pod).To(Equal("dora-0"))
			Expect(req.TTY).To(BeFalse())
			Expect(req.Command).To(Equal([]string{"/bin/sh", "-c", sftpProbe, "sh",
				"/usr/lib/openssh/sftp-server",
				"/usr/libexec/openssh/sftp-server",
				"/usr/lib/ssh/sftp-server",
				"/usr/lib/sftp-server",
				"/usr/libexec/sftp-server",
				"/usr/local/libexec/sftp-server",
				"/usr/lib64/misc/sftp-server",
			}))
		})

		It("looks where the proxy's setting says", func() {
			p = startProxy(st, func(o *sshproxy.Options) { o.SFTPServerPaths = []string{"/opt/ssh/sftp-server"} })
			p.executor.ExecStub = serveProgram("/opt/ssh/sftp-server", "", nil)
			Expect(sftp("").granted).To(BeTrue())
			_, req := p.executor.ExecArgsForCall(0)
			Expect(req.Command).To(Equal([]string{"/bin/sh", "-c", sftpProbe, "sh", "/opt/ssh/sftp-server"}))
		})

		It("runs without a terminal even when the client asked for a pty (the protocol is binary)", func() {
			p.executor.ExecStub = serveProgram("/usr/lib/sftp-server", "", nil)
			session := newSession(p.connect())
			Expect(session.RequestPty("xterm", 40, 80, ssh.TerminalModes{})).To(Succeed())
			Expect(session.RequestSubsystem("sftp")).To(Succeed())
			Eventually(p.executor.ExecCallCount).Should(Equal(1))
			_, req := p.executor.ExecArgsForCall(0)
			Expect(req.TTY).To(BeFalse())
			Expect(req.Stderr).NotTo(BeNil())
		})

		It("fails the request with a clear message when the image has no sftp-server", func() {
			p = startProxy(st, func(o *sshproxy.Options) { o.SFTPServerPaths = []string{"/a/sftp-server", "/b/sftp-server"} })
			p.executor.ExecStub = notFound
			r := sftp("")
			Expect(r.granted).To(BeFalse())
			Expect(r.stderr).To(Equal("opi ssh-proxy: sftp (and scp, which uses it) is not available in instance 0: " +
				"the image has no sftp-server (looked for /a/sftp-server, /b/sftp-server)\r\n"))
			Expect(r.status).To(BeNil(), "no command ran for the client")
			Expect(r.settledFirst).To(BeTrue(), "the client took the reason before the failure (OpenSSH drops what comes after)")
			Expect(string(p.logger.Buffer().Contents())).To(ContainSubstring("exit status 127"), "the exec's own error is kept for the operator")
		})

		It("passes on what the command printed when it failed before its probe answered", func() {
			p.executor.ExecStub = execWriting("", "sh: 1: cannot fork\n", errNotFound)
			r := sftp("")
			Expect(r.granted).To(BeFalse())
			Expect(r.stderr).To(HavePrefix("sh: 1: cannot fork\nopi ssh-proxy: sftp (and scp, which uses it) is not available"))
		})

		DescribeTable("refuses other subsystems, without exec, and the channel stays usable",
			func(name string) {
				p.executor.ExecStub = execWriting("hi\n", "", nil)
				session := newSession(p.connect())
				stderr, err := session.StderrPipe()
				Expect(err).NotTo(HaveOccurred())
				Expect(session.RequestSubsystem(name)).To(MatchError(ContainSubstring("subsystem request failed")))
				line := make([]byte, 200)
				n, err := stderr.Read(line)
				Expect(err).NotTo(HaveOccurred())
				Expect(string(line[:n])).To(Equal(fmt.Sprintf("opi ssh-proxy: the %q subsystem is not served, only \"sftp\"\r\n", name)))
				Expect(p.executor.ExecCallCount()).To(BeZero())

				stdout, err := session.StdoutPipe()
				Expect(err).NotTo(HaveOccurred())
				Expect(session.Run("echo hi")).To(Succeed())
				Expect(io.ReadAll(stdout)).To(Equal([]byte("hi\n")))
			},
			Entry("netconf", "netconf"),
			Entry("sftp's name in another case", "SFTP"),
		)

		It("refuses a second command on the same channel", func() {
			p.executor.ExecStub = serveProgram("/usr/lib/sftp-server", "", nil)
			session := newSession(p.connect())
			Expect(session.RequestSubsystem("sftp")).To(Succeed())
			ok, err := session.SendRequest("exec", true, ssh.Marshal(struct{ Command string }{"id"}))
			Expect(err).NotTo(HaveOccurred())
			Expect(ok).To(BeFalse())
			Expect(p.executor.ExecCallCount()).To(Equal(1))
		})
	})

	Describe("legacy scp (scp -O)", func() {
		DescribeTable("runs scp's remote end as any command is run, once the probe found scp",
			func(command string) {
				p.executor.ExecStub = serveProgram("/usr/bin/scp", "", nil)
				r := exec(command, "\x00")
				Expect(r.granted).To(BeTrue())
				Expect(r.stdout).To(Equal("\x00"))
				Expect(r.status).To(HaveValue(BeZero()))
				_, req := p.executor.ExecArgsForCall(0)
				Expect(req.TTY).To(BeFalse())
				Expect(req.Command).To(Equal([]string{"/bin/sh", "-c", scpProbe, "sh", command}))
			},
			Entry("to the instance", "scp -t /tmp"),
			Entry("to the instance, recursive, verbose, a target directory", "scp -v -r -d -t -- -odd-name"),
			Entry("from the instance", "scp -f app/logs/out.log"),
			Entry("from the instance, times kept", "scp -p -f 'a file'"),
		)

		DescribeTable("runs other commands as commands, scp's own client among them",
			func(command string) {
				p.executor.ExecStub = execWriting("", "", nil)
				r := exec(command, "")
				Expect(r.granted).To(BeTrue())
				_, req := p.executor.ExecArgsForCall(0)
				Expect(req.Command).To(Equal([]string{"/bin/sh", "-c",
					`for sh in /bin/bash /usr/local/bin/bash; do if [ -x "$sh" ]; then exec "$sh" -c "$1"; fi; done; exec /bin/sh -c "$1"`, "sh", command}))
			},
			Entry("scp as a client", "scp a.txt other-host:/tmp"),
			Entry("scp alone", "scp"),
			Entry("-t after the options ended", "scp -- -t"),
			Entry("scp named by a command", "echo scp -t /tmp"),
			Entry("scp's path", "/usr/bin/scp -t /tmp"),
		)

		It("fails the exec request with a clear message when the image has no scp", func() {
			p.executor.ExecStub = notFound
			r := exec("scp -t /tmp", "")
			Expect(r.granted).To(BeFalse())
			Expect(r.stderr).To(Equal("opi ssh-proxy: legacy scp (scp -O) is not available in instance 0: the image has no scp command\r\n"))
			Expect(r.settledFirst).To(BeTrue())
		})

		It("returns the remote end's exit status", func() {
			p.executor.ExecStub = serveProgram("/usr/bin/scp", "scp: x: No such file or directory\n",
				utilexec.CodeExitError{Err: errors.New("exit 1"), Code: 1})
			r := exec("scp -f x", "\x00")
			Expect(r.granted).To(BeTrue())
			Expect(r.status).To(HaveValue(Equal(uint32(1))))
			Expect(r.stderr).To(Equal("scp: x: No such file or directory\n"))
		})
	})

	Describe("the end of a transfer", func() {
		// lingering serves the program until ctx ends, however its stdin went: a runtime that
		// never closes the command's stdin (kwok) looks so.
		lingering := func(ctx context.Context, req sshproxy.ExecRequest) error {
			_, _ = io.WriteString(req.Stderr, found("/usr/lib/sftp-server"))
			in, _ := io.ReadAll(req.Stdin)
			_, _ = req.Stdout.Write(bytes.ToUpper(in))
			<-ctx.Done()
			return ctx.Err()
		}

		DescribeTable("ends the command a grace after the client ended its input, with exit status 0",
			func(reqType, arg string) {
				p = startProxy(st, func(o *sshproxy.Options) { o.InputEndGrace = 50 * time.Millisecond })
				p.executor.ExecStub = lingering
				r := transfer(reqType, arg, "bye")
				Expect(r.granted).To(BeTrue())
				Expect(r.stdout).To(Equal("BYE"), "what the program answered before its end reaches the client")
				Expect(r.status).To(HaveValue(BeZero()))
				Expect(r.stderr).To(BeEmpty())
			},
			Entry("sftp", "subsystem", "sftp"),
			Entry("legacy scp's sink", "exec", "scp -t /tmp"),
		)

		It("leaves a command that is no transfer running after its input ended", func() {
			p = startProxy(st, func(o *sshproxy.Options) { o.InputEndGrace = time.Millisecond })
			p.executor.ExecStub = func(ctx context.Context, req sshproxy.ExecRequest) error {
				_, _ = io.ReadAll(req.Stdin)
				// Still running well after the grace: it ends on its own.
				time.Sleep(100 * time.Millisecond)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				_, _ = io.WriteString(req.Stdout, "done\n")
				return nil
			}
			r := exec("sort", "b\na\n")
			Expect(r.stdout).To(Equal("done\n"))
			Expect(r.status).To(HaveValue(BeZero()))
		})

		It("ends the transfer with a message when the instance goes away", func() {
			p = startProxyLosingInstance(st, func(req sshproxy.ExecRequest) {
				_, _ = io.WriteString(req.Stderr, found("/usr/lib/sftp-server"))
			})
			r := sftp("")
			Expect(r.granted).To(BeTrue())
			Expect(r.status).To(HaveValue(Equal(uint32(255))))
			Expect(r.stderr).To(Equal("opi ssh-proxy: instance 0 has stopped; the session ends\r\n"))
		})
	})

	It("refuses sftp-server paths that are not absolute", func() {
		_, err := sshproxy.New(sshproxy.Options{
			HostKey: newHostKey(), MaxSessions: 1, MaxSessionsPerUser: 1, IdleTimeout: time.Minute, AuthTimeout: time.Second,
			Auth:            sshproxy.AuthConfig{UAATokenURL: st.TokenURL(), UAAClientID: "id", UAAClientSecret: "s", CCAPIURL: st.CCURL()},
			SFTPServerPaths: []string{"/usr/lib/sftp-server", "sftp-server"},
		}, sshproxy.Deps{})
		Expect(err).To(MatchError(ContainSubstring(`sftp-server path "sftp-server" is not an absolute path`)))
	})
})
