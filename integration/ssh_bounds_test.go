package integration_test

import (
	"io"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	"github.com/opi-bridge/opi/testsupport/sshstandin"
)

// openShell is an interactive shell through OpenSSH (ssh -tt), typed into as a user types.
type openShell struct {
	session *gexec.Session
	stdin   io.WriteCloser
}

// startShell opens a shell in the app's instance 0 through o; it is killed after the spec.
func startShell(o *sshstandin.OpenSSH) *openShell {
	GinkgoHelper()
	cmd := o.Command("-tt")
	stdin, err := cmd.StdinPipe()
	Expect(err).NotTo(HaveOccurred())
	session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { session.Kill() })
	return &openShell{session: session, stdin: stdin}
}

// answers types an arithmetic line and waits for its result: the shell is alive and reached.
func (sh *openShell) answers(expression, result string) {
	GinkgoHelper()
	_, err := io.WriteString(sh.stdin, "echo $(("+expression+"))\n")
	Expect(err).NotTo(HaveOccurred())
	Eventually(sh.session.Out, "30s").Should(gbytes.Say(result))
}

// exit ends the shell as a user does.
func (sh *openShell) exit() {
	GinkgoHelper()
	_, err := io.WriteString(sh.stdin, "exit\n")
	Expect(err).NotTo(HaveOccurred())
	Expect(sh.stdin.Close()).To(Succeed())
	Eventually(sh.session, "30s").Should(gexec.Exit(0), func() string { return string(sh.session.Err.Contents()) })
}

// The bounds `opi ssh-proxy` sets on sessions, and the session's end when CC stops the app,
// as OpenSSH's client sees them.
var _ = Describe("opi ssh-proxy's bounds and a session's end, with OpenSSH", Ordered, func() {
	var (
		a  *app
		o  *opiServer
		ns string
	)

	BeforeAll(func() {
		ns = newNamespace()
		o, a = runningApp(ns)
	})

	// refused runs a command through client that the proxy must refuse before any session: OpenSSH
	// shows the proxy's banner (its reason) at log level INFO.
	refused := func(client *sshstandin.OpenSSH, message string) {
		GinkgoHelper()
		session, err := gexec.Start(client.Logging("INFO").Command("echo in"), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		Eventually(session, "30s").Should(gexec.Exit(255))
		Expect(session.Err).To(gbytes.Say("opi ssh-proxy: " + message))
		Expect(session.Out.Contents()).To(BeEmpty())
	}

	DescribeTable("refuses the session over a bound with a clear message; the session within it goes on",
		func(flag, message string) {
			client := startSSHProxy(ns, a, flag, "1").openSSH()
			first := startShell(client)
			first.answers("6*7", "42")
			refused(client, message)
			first.answers("7*8", "56")
			first.exit()

			// Its end freed its place.
			session, err := gexec.Start(client.Command("echo in"), GinkgoWriter, GinkgoWriter)
			Expect(err).NotTo(HaveOccurred())
			Eventually(session, "30s").Should(gexec.Exit(0), func() string { return string(session.Err.Contents()) })
			Expect(session.Out).To(gbytes.Say("in"))
		},
		Entry("the user's bound, max-sessions-per-user", "--max-sessions-per-user", "you have 1 sessions open, the most one user may have"),
		Entry("the proxy's bound, max-sessions", "--max-sessions", `the proxy is at its bound of 1 sessions; try again later`),
	)

	It("closes a session that carries nothing for the idle timeout", func() {
		client := startSSHProxy(ns, a, "--idle-timeout", "2s").openSSH()
		sh := startShell(client)
		sh.answers("6*7", "42")
		Eventually(sh.session, "30s").Should(gexec.Exit(255))
		Expect(sh.session.Err).To(gbytes.Say("closed by remote host"))
	})

	// Last: it stops the app.
	It("ends a session with a message when Cloud Controller stops the app", func() {
		sh := startShell(startSSHProxy(ns, a).openSSH())
		sh.answers("6*7", "42")
		status, body := o.call(http.MethodPut, a.path()+"/stop", "")
		Expect(status).To(Equal(http.StatusOK), body)
		Eventually(sh.session.Out, "60s").Should(gbytes.Say(`opi ssh-proxy: instance 0 has stopped; the session ends\r\n`))
		Eventually(sh.session, "30s").Should(gexec.Exit(255))
	})
})
