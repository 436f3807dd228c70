package sshproxy_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"golang.org/x/crypto/ssh"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/opi-bridge/opi/k8s/instances"
	"github.com/opi-bridge/opi/opi"
	"github.com/opi-bridge/opi/sshproxy"
	"github.com/opi-bridge/opi/sshproxy/sshproxyfakes"
	"github.com/opi-bridge/opi/testsupport/sshstandin"
)

const (
	processGUID  = "4f8d7c2e-6b1a-4e3f-9c5d-0a1b2c3d4e5f"
	version      = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b"
	goodCode     = "abc123"
	clientID     = "ssh-proxy"
	clientSecret = "s3cret-client"
)

// standIns are UAA's and CC's, granting goodCode of user-1 the process's version.
type standIns struct{ *sshstandin.Server }

func startStandIns() *standIns {
	st := sshstandin.Start(sshstandin.Options{
		ClientID: clientID, ClientSecret: clientSecret, Code: goodCode, UserID: "user-1", ProcessGUID: processGUID + "-" + version,
	})
	DeferCleanup(st.Close)
	return &standIns{st}
}

// proxy is a Server on a loopback port with fakes for Kubernetes.
type proxy struct {
	addr      string
	prints    sshproxy.Fingerprints
	instances *sshproxyfakes.FakeInstances
	executor  *sshproxyfakes.FakeExecutor
	lines     *sshproxyfakes.FakeEmitter
	forwarder *sshproxyfakes.FakeForwarder
	logger    *lagertest.TestLogger
	server    *sshproxy.Server
	// stop stops Serve and waits for it to return.
	stop func()
}

func runningPod(name string) *instances.Pod {
	return &instances.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}, State: opi.InstanceRunning}
}

// newHostKey is a fresh ed25519 host key.
func newHostKey() ssh.Signer {
	GinkgoHelper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	signer, err := ssh.NewSignerFromKey(priv)
	Expect(err).NotTo(HaveOccurred())
	return signer
}

// startProxyLosingInstance starts a proxy that checks its instances often and whose command
// calls begin (when not nil), then loses its instance and runs until the proxy ends it.
func startProxyLosingInstance(st *standIns, begin func(sshproxy.ExecRequest)) *proxy {
	p := startProxy(st, func(o *sshproxy.Options) { o.InstanceCheckPeriod = 20 * time.Millisecond })
	gone := &atomic.Bool{}
	p.instances.PodStub = func(name string) (*instances.Pod, bool) {
		if gone.Load() {
			return nil, false
		}
		return runningPod(name), true
	}
	p.executor.ExecStub = func(ctx context.Context, req sshproxy.ExecRequest) error {
		if begin != nil {
			begin(req)
		}
		gone.Store(true)
		<-ctx.Done()
		return ctx.Err()
	}
	return p
}

// beforeEachProxy starts, before each spec of the calling container, the stand-ins into *st
// and a proxy of the usual settings into *p.
func beforeEachProxy(st **standIns, p **proxy) {
	BeforeEach(func() {
		*st = startStandIns()
		*p = startProxy(*st, nil)
	})
}

func startProxy(st *standIns, tune func(*sshproxy.Options)) *proxy {
	return startProxyWith(st, tune, nil)
}

// startProxyWith starts a proxy whose deps (the fakes filled in) relay adjusts.
func startProxyWith(st *standIns, tune func(*sshproxy.Options), relay func(*proxy) sshproxy.Relay) *proxy {
	opts := sshproxy.Options{
		HostKey: newHostKey(),
		Auth: sshproxy.AuthConfig{
			UAATokenURL: st.TokenURL(), UAAClientID: clientID, UAAClientSecret: clientSecret,
			CCAPIURL: st.CCURL(),
		},
		MaxSessions: 10, MaxSessionsPerUser: 5,
		IdleTimeout: time.Minute, AuthTimeout: 10 * time.Second,
	}
	if tune != nil {
		tune(&opts)
	}
	var err error
	p := &proxy{instances: &sshproxyfakes.FakeInstances{}, executor: &sshproxyfakes.FakeExecutor{}, lines: &sshproxyfakes.FakeEmitter{}, forwarder: &sshproxyfakes.FakeForwarder{}, logger: lagertest.NewTestLogger("ssh-proxy")}
	p.instances.InstanceStub = func(opi.LRPIdentifier, int32) (*instances.Pod, *instances.Workload, bool) {
		return runningPod("dora-0"), &instances.Workload{}, true
	}
	p.instances.PodStub = func(name string) (*instances.Pod, bool) { return runningPod(name), true }
	deps := sshproxy.Deps{Instances: p.instances, Executor: p.executor, Lines: p.lines, Forwarder: p.forwarder, Logger: p.logger}
	if relay != nil {
		deps.Relay = relay(p)
	}
	p.server, err = sshproxy.New(opts, deps)
	Expect(err).NotTo(HaveOccurred())
	p.prints = p.server.Fingerprints()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	p.addr = l.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.server.Serve(ctx, l) }()
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			cancel()
			Eventually(done).Should(Receive(BeNil()))
		})
	}
	DeferCleanup(p.stop)
	return p
}

// cfClient connects as the cf CLI does, checking the proxy's MD5 fingerprint.
func (p *proxy) cfClient(user, code string, banner *gbytes.Buffer) (*ssh.Client, error) {
	if banner == nil {
		return sshstandin.Dial(p.addr, user, code, p.prints.MD5, nil)
	}
	return sshstandin.Dial(p.addr, user, code, p.prints.MD5, banner)
}

func user(index int) string { return sshstandin.User(processGUID, index) }

// connect connects as the cf CLI does to instance 0 with the good code; the connection closes at
// cleanup.
func (p *proxy) connect() *ssh.Client {
	GinkgoHelper()
	client := p.dialInstance0()
	DeferCleanup(client.Close)
	return client
}

func (p *proxy) dialInstance0() *ssh.Client {
	GinkgoHelper()
	client, err := p.cfClient(user(0), goodCode, nil)
	Expect(err).NotTo(HaveOccurred())
	return client
}

// connectToBeClosed is connect for a spec where the proxy closes the connection: closing it
// again at cleanup may fail.
func (p *proxy) connectToBeClosed() *ssh.Client {
	GinkgoHelper()
	client := p.dialInstance0()
	DeferCleanup(func() { _ = client.Close() })
	return client
}

// newSession opens a session channel on client.
func newSession(client *ssh.Client) *ssh.Session {
	GinkgoHelper()
	session, err := client.NewSession()
	Expect(err).NotTo(HaveOccurred())
	return session
}

// startUntilEnded starts a command in a new session of client that runs until the proxy ends
// it; ended is closed then.
func (p *proxy) startUntilEnded(client *ssh.Client) (session *ssh.Session, ended <-chan struct{}) {
	GinkgoHelper()
	done := make(chan struct{})
	p.executor.ExecStub = func(ctx context.Context, req sshproxy.ExecRequest) error {
		<-ctx.Done()
		close(done)
		return ctx.Err()
	}
	session = newSession(client)
	Expect(session.Start("sleep 1000")).To(Succeed())
	Eventually(p.executor.ExecCallCount).Should(Equal(1))
	return session, done
}

var _ = Describe("Authentication", func() {
	var (
		st *standIns
		p  *proxy
	)

	beforeEachProxy(&st, &p)

	It("exchanges the code at UAA, asks CC with the user's token, and enters the instance CC's process guid names", func() {
		p.executor.ExecReturns(nil)
		Expect(newSession(p.connect()).Run("true")).To(Succeed())

		Expect(st.UAACalls()).To(Equal([]string{"POST /oauth/token " + clientID + ":" + clientSecret + " code=" + goodCode + "&grant_type=authorization_code"}))
		Expect(st.CCCalls()).To(Equal([]string{"GET /internal/apps/" + processGUID + "/ssh_access/0 bearer " + st.Token()}))
		Expect(p.instances.InstanceCallCount()).To(Equal(1))
		id, index := p.instances.InstanceArgsForCall(0)
		Expect(id).To(Equal(opi.LRPIdentifier{GUID: processGUID, Version: version}))
		Expect(index).To(Equal(int32(0)))
		_, req := p.executor.ExecArgsForCall(0)
		Expect(req.Pod).To(Equal("dora-0"))
		Expect(string(p.logger.Buffer().Contents())).NotTo(Or(ContainSubstring(goodCode), ContainSubstring(st.Token()), ContainSubstring(clientSecret)))
	})

	DescribeTable("refuses with a clear message and no Kubernetes call",
		func(userName, code string, ccStatus int, ccBody string, message string) {
			if ccStatus != 0 {
				st.SetCCAnswer(ccStatus, ccBody)
			}
			banner := gbytes.NewBuffer()
			_, err := p.cfClient(userName, code, banner)
			Expect(err).To(MatchError(ContainSubstring("unable to authenticate")))
			Expect(banner).To(gbytes.Say("opi ssh-proxy: " + message))
			Expect(p.instances.InstanceCallCount()).To(Equal(0))
			Expect(p.executor.ExecCallCount()).To(Equal(0))
			Expect(string(p.logger.Buffer().Contents())).NotTo(Or(ContainSubstring(goodCode), ContainSubstring(st.Token()), ContainSubstring(clientSecret)))
		},
		Entry("a wrong code", user(0), "wrong", 0, "", `authentication failed: UAA did not accept the one-time code`),
		Entry("no code", user(0), "", 0, "", `authentication failed: no one-time code given`),
		Entry("CC's 400", user(0), goodCode, http.StatusBadRequest, `{}`, `access denied: Cloud Controller refused SSH to instance 0 of process `+processGUID+` \(400\)`),
		Entry("CC's 403", user(0), goodCode, http.StatusForbidden, `{}`, `access denied: Cloud Controller refused SSH to instance 0 of process `+processGUID+` \(403\)`),
		Entry("CC's 404", user(2), goodCode, http.StatusNotFound, `{}`, `access denied: Cloud Controller refused SSH to instance 2 of process `+processGUID+` \(404\)`),
		Entry("CC naming another process", user(0), goodCode, http.StatusOK, `{"process_guid":"0000-`+version+`"}`, `access denied: Cloud Controller's answer names another process`),
		Entry("CC's answer without a version", user(0), goodCode, http.StatusOK, `{"process_guid":"`+processGUID+`"}`, `access denied: Cloud Controller's answer names another process`),
		Entry("a user name that is not the cf CLI's", "root", goodCode, 0, "", `invalid user name "root": expected cf:<process guid>/<index>`),
		Entry("an index that is no number", "cf:"+processGUID+"/x", goodCode, 0, "", `invalid user name`),
		Entry("a guid that is no guid", "cf:../../v2/x/0", goodCode, 0, "", `invalid user name`),
	)

	It("calls neither UAA nor CC for a user name that is not the cf CLI's", func() {
		_, err := p.cfClient("cf:"+processGUID, goodCode, nil)
		Expect(err).To(HaveOccurred())
		Expect(st.UAACalls()).To(BeEmpty())
		Expect(st.CCCalls()).To(BeEmpty())
	})

	DescribeTable("refuses an instance that is not RUNNING, and one that does not exist, without exec",
		func(pod *instances.Pod, found bool, message string) {
			p.instances.InstanceStub = nil
			p.instances.InstanceReturns(pod, &instances.Workload{}, found)
			banner := gbytes.NewBuffer()
			_, err := p.cfClient(user(1), goodCode, banner)
			Expect(err).To(HaveOccurred())
			Expect(banner).To(gbytes.Say("opi ssh-proxy: " + message))
			Expect(p.executor.ExecCallCount()).To(Equal(0))
		},
		Entry("crashed", &instances.Pod{ObjectMeta: metav1.ObjectMeta{Name: "dora-1"}, State: opi.InstanceCrashed}, true, `instance 1 is not running \(CRASHED\)`),
		Entry("starting", &instances.Pod{ObjectMeta: metav1.ObjectMeta{Name: "dora-1"}, State: opi.InstanceClaimed}, true, `instance 1 is not running \(CLAIMED\)`),
		Entry("missing", nil, false, `instance 1 does not exist`),
	)

	It("refuses UAA and CC over plain http off loopback unless opted in", func() {
		cfg := sshproxy.AuthConfig{UAATokenURL: "http://uaa.example.com/oauth/token", UAAClientID: "id", UAAClientSecret: "s", CCAPIURL: "http://cc.service.cf.internal:9022"}
		Expect(cfg.Validate()).To(MatchError(And(
			ContainSubstring("uaa-token-url: refusing plain http to uaa.example.com"),
			ContainSubstring("cc-api-url: refusing plain http to cc.service.cf.internal:9022"),
		)))
		cfg.AllowPlainHTTP = true
		Expect(cfg.Validate()).To(Succeed())
		cfg = sshproxy.AuthConfig{UAATokenURL: "https://uaa.example.com/oauth/token", UAAClientID: "id", UAAClientSecret: "s", CCAPIURL: "http://127.0.0.1:9022"}
		Expect(cfg.Validate()).To(Succeed(), "loopback may be plain")
	})
})

var _ = Describe("The SSH log lines", func() {
	var (
		st *standIns
		p  *proxy
	)

	beforeEachProxy(&st, &p)

	BeforeEach(func() {
		pod := runningPod("dora-1")
		workload := &instances.Workload{
			LRPRef:  instances.LRPRef{GUID: processGUID, Version: version},
			AppGUID: "app-guid", ProcessType: "web", AppName: "dora",
			SpaceGUID: "space-guid", SpaceName: "dev", OrgGUID: "org-guid", OrgName: "acme",
		}
		p.instances.InstanceStub = func(opi.LRPIdentifier, int32) (*instances.Pod, *instances.Workload, bool) {
			return pod, workload, true
		}
	})

	// lines are what the proxy sent, once it stopped (so every connection has ended).
	lines := func() []*loggregator_v2.Envelope {
		p.stop()
		var envs []*loggregator_v2.Envelope
		for i := range p.lines.EmitCallCount() {
			env, _ := p.lines.EmitArgsForCall(i)
			envs = append(envs, env)
		}
		return envs
	}

	It("puts who came in and that they left into the app's log stream, with the instance's identity and source type SSH", func() {
		client, err := p.cfClient(user(1), goodCode, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(newSession(client).Run("true")).To(Succeed())
		remote := client.LocalAddr().String()
		Expect(client.Close()).To(Succeed())

		envs := lines()
		Expect(envs).To(HaveLen(2))
		for i, payload := range []string{"Successful remote access by " + remote, "Remote access ended for " + remote} {
			env := envs[i]
			Expect(env.SourceId).To(Equal("app-guid"))
			Expect(env.InstanceId).To(Equal("1"))
			Expect(env.Timestamp).NotTo(BeZero())
			Expect(env.Tags).To(Equal(map[string]string{
				"source_type": "SSH",
				"app_id":      "app-guid", "app_name": "dora",
				"space_id": "space-guid", "space_name": "dev",
				"organization_id": "org-guid", "organization_name": "acme",
				"process_id": processGUID, "process_type": "web",
				"process_instance_id": "uid-dora-1",
			}))
			Expect(string(env.GetLog().GetPayload())).To(Equal(payload))
			Expect(env.GetLog().GetType()).To(Equal(loggregator_v2.Log_OUT))
		}
	})

	DescribeTable("sends none for a refused attempt",
		func(code, state string) {
			p.instances.InstanceStub = nil
			p.instances.InstanceReturns(&instances.Pod{ObjectMeta: metav1.ObjectMeta{Name: "dora-1"}, State: state}, &instances.Workload{AppGUID: "app-guid"}, true)
			_, err := p.cfClient(user(1), code, nil)
			Expect(err).To(MatchError(ContainSubstring("unable to authenticate")))
			Expect(lines()).To(BeEmpty())
		},
		Entry("a wrong code", "wrong", opi.InstanceRunning),
		Entry("an instance not running", goodCode, opi.InstanceCrashed),
	)
})

// execWriting is an executor that writes out and errOut and returns err.
func execWriting(out, errOut string, err error) func(context.Context, sshproxy.ExecRequest) error {
	return func(_ context.Context, req sshproxy.ExecRequest) error {
		_, _ = io.WriteString(req.Stdout, out)
		if req.Stderr != nil {
			_, _ = io.WriteString(req.Stderr, errOut)
		}
		return err
	}
}

var _ = Describe("Sessions", func() {
	var (
		st *standIns
		p  *proxy
	)

	beforeEachProxy(&st, &p)

	It("runs an exec request's command with bash if present, else sh, stdout and stderr apart, exit status 0", func() {
		p.executor.ExecStub = execWriting("hi\n", "oops\n", nil)
		stdout, stderr, err := sshstandin.Run(p.connect(), "echo hi; echo oops >&2", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(stdout).To(Equal("hi\n"))
		Expect(stderr).To(Equal("oops\n"))

		_, req := p.executor.ExecArgsForCall(0)
		Expect(req.TTY).To(BeFalse())
		Expect(req.Sizes).To(BeNil())
		Expect(req.Command).To(Equal([]string{"/bin/sh", "-c",
			`for sh in /bin/bash /usr/local/bin/bash; do if [ -x "$sh" ]; then exec "$sh" -c "$1"; fi; done; exec /bin/sh -c "$1"`,
			"sh", "echo hi; echo oops >&2"}))
	})

	DescribeTable("returns the command's exit status as SSH's exit-status",
		func(execErr error, status int, stderr string) {
			p.executor.ExecStub = execWriting("", "", execErr)
			_, errOut, err := sshstandin.Run(p.connect(), "false", nil)
			var exit *ssh.ExitError
			Expect(errors.As(err, &exit)).To(BeTrue(), fmt.Sprint(err))
			Expect(exit.ExitStatus()).To(Equal(status))
			Expect(errOut).To(Equal(stderr))
		},
		Entry("a non-zero exit", utilexec.CodeExitError{Err: errors.New("command terminated with exit code 3"), Code: 3}, 3, ""),
		Entry("exit 127 (no such command)", utilexec.CodeExitError{Err: errors.New("exit 127"), Code: 127}, 127, ""),
		Entry("an exec that failed: 255 and the reason", errors.New(`exec: "/bin/sh": stat /bin/sh: no such file or directory`), 255,
			"opi ssh-proxy: the session with instance 0 failed: exec: \"/bin/sh\": stat /bin/sh: no such file or directory\r\n"),
	)

	It("streams stdin to the command and closes it on the client's EOF", func() {
		p.executor.ExecStub = func(_ context.Context, req sshproxy.ExecRequest) error {
			in, err := io.ReadAll(req.Stdin)
			if err != nil {
				return err
			}
			_, _ = req.Stdout.Write(bytes.ToUpper(in))
			return nil
		}
		stdout, _, err := sshstandin.Run(p.connect(), "tr a-z A-Z", strings.NewReader("hello\nworld\n"))
		Expect(err).NotTo(HaveOccurred())
		Expect(stdout).To(Equal("HELLO\nWORLD\n"))
	})

	It("runs a shell under a pty with the terminal's size and its changes, one stream", func() {
		sizes := make(chan remotecommand.TerminalSize, 2)
		p.executor.ExecStub = func(_ context.Context, req sshproxy.ExecRequest) error {
			defer GinkgoRecover()
			Expect(req.TTY).To(BeTrue())
			Expect(req.Stderr).To(BeNil())
			for range 2 {
				size := req.Sizes.Next()
				Expect(size).NotTo(BeNil())
				sizes <- *size
			}
			_, _ = io.WriteString(req.Stdout, "$ ")
			return nil
		}
		session := newSession(p.connect())
		var stdout bytes.Buffer
		session.Stdout = &stdout
		Expect(session.RequestPty("xterm", 40, 80, ssh.TerminalModes{})).To(Succeed())
		Expect(session.Shell()).To(Succeed())
		Eventually(sizes).Should(Receive(Equal(remotecommand.TerminalSize{Width: 80, Height: 40})))
		Expect(session.WindowChange(50, 132)).To(Succeed())
		Eventually(sizes).Should(Receive(Equal(remotecommand.TerminalSize{Width: 132, Height: 50})))
		Expect(session.Wait()).To(Succeed())
		Expect(stdout.String()).To(Equal("$ "))

		_, req := p.executor.ExecArgsForCall(0)
		Expect(req.Command).To(Equal([]string{"/bin/sh", "-c",
			`for sh in /bin/bash /usr/local/bin/bash; do if [ -x "$sh" ]; then exec "$sh" ; fi; done; exec /bin/sh `}))
	})

	It("ends the session with a message when the instance goes away", func() {
		p = startProxyLosingInstance(st, nil)
		_, stderr, err := sshstandin.Run(p.connect(), "sleep 1000", nil)
		var exit *ssh.ExitError
		Expect(errors.As(err, &exit)).To(BeTrue(), fmt.Sprint(err))
		Expect(exit.ExitStatus()).To(Equal(255))
		Expect(stderr).To(Equal("opi ssh-proxy: instance 0 has stopped; the session ends\r\n"))
	})

	It("ends the command when the client closes the session", func() {
		session, ended := p.startUntilEnded(p.connect())
		Expect(session.Close()).To(Succeed())
		Eventually(ended).Should(BeClosed())
	})

	It("refuses channels other than sessions and tunnels", func() {
		_, _, err := p.connect().OpenChannel("x11", nil)
		Expect(err).To(MatchError(ContainSubstring("serves session and direct-tcpip channels only")))
	})

	It("serves the host key's fingerprints on its ops handler", func() {
		rec := httptest.NewRecorder()
		p.server.OpsHandler(func() bool { return true }).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/fingerprints", nil))
		Expect(rec.Code).To(Equal(http.StatusOK))
		var prints sshproxy.Fingerprints
		Expect(json.Unmarshal(rec.Body.Bytes(), &prints)).To(Succeed())
		Expect(prints).To(Equal(p.prints))

		rec = httptest.NewRecorder()
		p.server.OpsHandler(func() bool { return false }).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		Expect(rec.Code).To(Equal(http.StatusServiceUnavailable))
	})
})

var _ = Describe("Bounds", func() {
	var st *standIns

	BeforeEach(func() { st = startStandIns() })

	It("holds at most max-sessions-per-user connections of one user, and frees them when they close", func() {
		p := startProxy(st, func(o *sshproxy.Options) { o.MaxSessionsPerUser = 1 })
		first, err := p.cfClient(user(0), goodCode, nil)
		Expect(err).NotTo(HaveOccurred())

		banner := gbytes.NewBuffer()
		_, err = p.cfClient(user(0), goodCode, banner)
		Expect(err).To(HaveOccurred())
		Expect(banner).To(gbytes.Say("opi ssh-proxy: you have 1 sessions open, the most one user may have"))

		Expect(first.Close()).To(Succeed())
		Eventually(func() error {
			c, err := p.cfClient(user(0), goodCode, nil)
			if err == nil {
				c.Close()
			}
			return err
		}).Should(Succeed())
	})

	It("holds at most max-sessions connections", func() {
		p := startProxy(st, func(o *sshproxy.Options) { o.MaxSessions = 1 })
		first, err := p.cfClient(user(0), goodCode, nil)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(first.Close)
		banner := gbytes.NewBuffer()
		_, err = p.cfClient(user(1), goodCode, banner)
		Expect(err).To(HaveOccurred())
		Expect(banner).To(gbytes.Say("opi ssh-proxy: the proxy is at its bound of 1 sessions"))
	})

	It("closes a connection that does not authenticate within the auth timeout", func() {
		p := startProxy(st, func(o *sshproxy.Options) { o.AuthTimeout = 200 * time.Millisecond })
		conn, err := net.Dial("tcp", p.addr)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(conn.Close)
		Expect(conn.SetReadDeadline(time.Now().Add(10 * time.Second))).To(Succeed())
		_, err = io.ReadAll(conn) // the server's version line, then the close
		Expect(err).NotTo(HaveOccurred(), "closed by the proxy, not by our deadline")
		Expect(st.UAACalls()).To(BeEmpty())
	})

	It("ends its connections and their commands when it stops", func() {
		p := startProxy(st, nil)
		client := p.connectToBeClosed()
		_, ended := p.startUntilEnded(client)

		p.stop()
		Expect(ended).To(BeClosed())
		Expect(client.Wait()).To(HaveOccurred())
	})

	It("closes a connection that carries nothing for the idle timeout", func() {
		p := startProxy(st, func(o *sshproxy.Options) { o.IdleTimeout = 300 * time.Millisecond })
		client := p.connectToBeClosed()
		done := make(chan error, 1)
		go func() { done <- client.Wait() }()
		Eventually(done).Should(Receive())
	})
})
