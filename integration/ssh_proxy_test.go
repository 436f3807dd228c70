package integration_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	"golang.org/x/crypto/ssh"

	"github.com/opi-bridge/opi/sshproxy"
	"github.com/opi-bridge/opi/testsupport/sshstandin"
)

// The SSH proxy's client and secret at the UAA stand-in, and the one code it exchanges.
const (
	sshClientID     = "ssh-proxy"
	sshClientSecret = "ssh-proxy-secret"
	sshCode         = "one-time-code"
)

// sshProxy is an `opi ssh-proxy` a spec started for one app's instance 0 in ns, with the UAA
// and CC stand-ins granting it.
type sshProxy struct {
	addr    string
	prints  sshproxy.Fingerprints
	hostKey ssh.PublicKey
	app     *app
	session *gexec.Session
}

// startSSHProxy starts the proxy for a (running in ns) with exactly the Role of its kustomize
// component, extraArgs added to its flags, and stops it (SIGTERM, a clean exit) at cleanup.
func startSSHProxy(ns string, a *app, extraArgs ...string) *sshProxy {
	GinkgoHelper()
	return startSSHProxyWithRole(ns, a, sshProxyRole(), extraArgs...)
}

// sshProxyRole is the ssh-proxy component's rbac.yaml: the proxy's ServiceAccount, Role and
// RoleBinding.
func sshProxyRole() string {
	GinkgoHelper()
	rbac, err := os.ReadFile("../deploy/kustomize/components/ssh-proxy/rbac.yaml")
	Expect(err).NotTo(HaveOccurred())
	return string(rbac)
}

// startSSHProxyWithRole is startSSHProxy with the component's rbac.yaml as rbac says.
func startSSHProxyWithRole(ns string, a *app, rbac string, extraArgs ...string) *sshProxy {
	GinkgoHelper()
	st := sshstandin.Start(sshstandin.Options{
		ClientID: sshClientID, ClientSecret: sshClientSecret, Code: sshCode, UserID: "user-1", ProcessGUID: a.processGUID(),
	})
	DeferCleanup(st.Close)

	keyFile := filepath.Join(GinkgoT().TempDir(), "host-key.pem")
	hostKey, err := sshstandin.WriteHostKey(keyFile)
	Expect(err).NotTo(HaveOccurred())

	kubeconfig, err := cluster.ServiceAccountKubeconfig(context.Background(),
		strings.ReplaceAll(rbac, "cf-workloads", ns), ns, "opi-ssh-proxy")
	Expect(err).NotTo(HaveOccurred())

	p := &sshProxy{addr: freeAddr(), hostKey: hostKey, app: a}
	opsAddr := freeAddr()
	p.session, err = gexec.Start(exec.Command(opiBin, append([]string{"ssh-proxy",
		"--kubeconfig", kubeconfig, "--namespace", ns, "--backend", testBackend,
		"--listen", p.addr, "--ops-listen", opsAddr, "--host-key", keyFile,
	}, append(st.ProxyFlags(), extraArgs...)...)...), GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	session := p.session
	DeferCleanup(func() {
		session.Terminate().Wait(20 * time.Second)
		Expect(session.ExitCode()).To(Equal(0), "the proxy did not stop cleanly on SIGTERM")
	})
	Eventually(func() int {
		resp, err := http.Get("http://" + opsAddr + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}).Should(Equal(http.StatusOK))
	resp, err := http.Get("http://" + opsAddr + "/fingerprints")
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	Expect(json.NewDecoder(resp.Body).Decode(&p.prints)).To(Succeed())
	Expect(p.prints.SHA256).To(Equal(strings.TrimPrefix(ssh.FingerprintSHA256(p.hostKey), "SHA256:")))
	Expect(p.session.Out).To(gbytes.Say(`host-key.*` + regexp.QuoteMeta(p.prints.SHA256)))
	return p
}

// dial connects as the cf CLI does to instance 0 with code; banner, when not nil, receives
// what the proxy says before it refuses.
func (p *sshProxy) dial(code string, banner io.Writer) (*ssh.Client, error) {
	return sshstandin.Dial(p.addr, sshstandin.User(p.app.guid, 0), code, p.prints.MD5, banner)
}

// run runs command in instance 0 through a new connection, as `cf ssh APP -c COMMAND` does, and
// returns its stdout and stderr, apart, and how it ended.
func (p *sshProxy) run(command string) (string, string, error) {
	GinkgoHelper()
	client, err := p.dial(sshCode, nil)
	Expect(err).NotTo(HaveOccurred())
	defer client.Close()
	return sshstandin.Run(client, command, nil)
}

// expectOutputsApart runs a command writing to both its outputs through p: each arrives on its
// own stream, and the exit status is 0.
func (p *sshProxy) expectOutputsApart() {
	GinkgoHelper()
	stdout, stderr, err := p.run("echo hi; echo oops >&2")
	Expect(err).NotTo(HaveOccurred())
	Expect(stdout).To(Equal("hi\n"))
	Expect(stderr).To(Equal("oops\n"))
}

// openSSH is OpenSSH's client to instance 0 through the proxy; it fails the spec when the client
// is missing.
func (p *sshProxy) openSSH() *sshstandin.OpenSSH {
	GinkgoHelper()
	requireOpenSSH()
	o, err := sshstandin.NewOpenSSH(GinkgoT().TempDir(), p.addr, sshstandin.User(p.app.guid, 0), sshCode, p.hostKey)
	Expect(err).NotTo(HaveOccurred())
	return o
}

// requireOpenSSH fails the spec when OpenSSH's client is not installed.
func requireOpenSSH() {
	GinkgoHelper()
	if _, err := exec.LookPath("ssh"); err != nil {
		Fail("OpenSSH's client (ssh) is missing: install openssh-client (.ci/run does when it runs as root)")
	}
}
