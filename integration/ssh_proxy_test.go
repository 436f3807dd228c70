package integration_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
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
	st := sshstandin.Start(sshstandin.Options{
		ClientID: sshClientID, ClientSecret: sshClientSecret, Code: sshCode, UserID: "user-1", ProcessGUID: a.processGUID(),
	})
	DeferCleanup(st.Close)

	_, priv, err := ed25519.GenerateKey(rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	Expect(err).NotTo(HaveOccurred())
	keyFile := filepath.Join(GinkgoT().TempDir(), "host-key.pem")
	Expect(os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)).To(Succeed())
	signer, err := ssh.NewSignerFromKey(priv)
	Expect(err).NotTo(HaveOccurred())

	rbac, err := os.ReadFile("../deploy/kustomize/components/ssh-proxy/rbac.yaml")
	Expect(err).NotTo(HaveOccurred())
	kubeconfig, err := cluster.ServiceAccountKubeconfig(context.Background(),
		strings.ReplaceAll(string(rbac), "cf-workloads", ns), ns, "opi-ssh-proxy")
	Expect(err).NotTo(HaveOccurred())

	p := &sshProxy{addr: freeAddr(), hostKey: signer.PublicKey(), app: a}
	opsAddr := freeAddr()
	p.session, err = gexec.Start(exec.Command(opiBin, append([]string{"ssh-proxy",
		"--kubeconfig", kubeconfig, "--namespace", ns, "--backend", testBackend,
		"--listen", p.addr, "--ops-listen", opsAddr, "--host-key", keyFile,
		"--uaa-token-url", st.TokenURL(), "--uaa-client-id", sshClientID, "--uaa-client-secret", sshClientSecret,
		"--cc-api-url", st.CCURL(),
	}, extraArgs...)...), GinkgoWriter, GinkgoWriter)
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

// openSSH runs OpenSSH's client against a proxy: the proxy's host key its only known host, the
// code given through SSH_ASKPASS.
type openSSH struct {
	proxy      *sshProxy
	knownHosts string
	askpass    string
}

// openSSH fails the spec when OpenSSH's client is missing, and writes its files.
func (p *sshProxy) openSSH() *openSSH {
	GinkgoHelper()
	if _, err := exec.LookPath("ssh"); err != nil {
		Fail("OpenSSH's client (ssh) is missing: install openssh-client (.ci/run does when it runs as root)")
	}
	dir := GinkgoT().TempDir()
	host, port, err := net.SplitHostPort(p.addr)
	Expect(err).NotTo(HaveOccurred())
	o := &openSSH{proxy: p, knownHosts: filepath.Join(dir, "known_hosts"), askpass: filepath.Join(dir, "askpass")}
	line := fmt.Sprintf("[%s]:%s %s", host, port, ssh.MarshalAuthorizedKey(p.hostKey))
	Expect(os.WriteFile(o.knownHosts, []byte(line), 0o600)).To(Succeed())
	// OpenSSH asks SSH_ASKPASS for the password (the code) when told to.
	Expect(os.WriteFile(o.askpass, []byte("#!/bin/sh\necho "+sshCode+"\n"), 0o700)).To(Succeed())
	return o
}

// command is `ssh` to instance 0 through the proxy with args after the host.
func (o *openSSH) command(args ...string) *exec.Cmd {
	GinkgoHelper()
	host, port, err := net.SplitHostPort(o.proxy.addr)
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command("ssh", append([]string{
		"-F", "none", "-p", port, "-l", sshstandin.User(o.proxy.app.guid, 0),
		"-o", "UserKnownHostsFile=" + o.knownHosts, "-o", "StrictHostKeyChecking=yes",
		"-o", "PreferredAuthentications=password", "-o", "PubkeyAuthentication=no",
		"-o", "NumberOfPasswordPrompts=1", "-o", "LogLevel=ERROR", host,
	}, args...)...)
	cmd.Env = append(os.Environ(), "SSH_ASKPASS="+o.askpass, "SSH_ASKPASS_REQUIRE=force", "DISPLAY=none")
	return cmd
}
