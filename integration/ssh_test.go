package integration_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
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
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/opi-bridge/opi/sshproxy"
	lgstandin "github.com/opi-bridge/opi/testsupport/loggregator"
	"github.com/opi-bridge/opi/testsupport/sshstandin"
)

// The SSH proxy's client and secret at the UAA stand-in, and the one code it exchanges.
const (
	sshClientID     = "ssh-proxy"
	sshClientSecret = "ssh-proxy-secret"
	sshCode         = "one-time-code"
)

var _ = Describe("cf ssh through opi ssh-proxy", Ordered, func() {
	var (
		a         *app
		st        *sshstandin.Server
		proxyAddr string
		prints    sshproxy.Fingerprints
		hostKey   ssh.PublicKey
		namespace string
		lines     *lgstandin.Server
	)

	BeforeAll(func() {
		ns := newNamespace()
		o := startOpi(ns)
		a = newApp()
		a.instances = 1
		desire(o, a)
		Eventually(allRunning(o, a)).Should(Equal(running(1)))

		st = sshstandin.Start(sshstandin.Options{
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
		hostKey = signer.PublicKey()

		// The proxy runs with exactly the Role of its kustomize component.
		rbac, err := os.ReadFile("../deploy/kustomize/components/ssh-proxy/rbac.yaml")
		Expect(err).NotTo(HaveOccurred())
		kubeconfig, err := cluster.ServiceAccountKubeconfig(context.Background(),
			strings.ReplaceAll(string(rbac), "cf-workloads", ns), ns, "opi-ssh-proxy")
		Expect(err).NotTo(HaveOccurred())
		namespace = ns

		lines, err = lgstandin.Start(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(lines.Stop)
		files := lines.ClientFiles()

		proxyAddr = freeAddr()
		opsAddr := freeAddr()
		session, err := gexec.Start(exec.Command(opiBin, "ssh-proxy",
			"--kubeconfig", kubeconfig, "--namespace", ns, "--backend", testBackend,
			"--listen", proxyAddr, "--ops-listen", opsAddr, "--host-key", keyFile,
			"--uaa-token-url", st.TokenURL(), "--uaa-client-id", sshClientID, "--uaa-client-secret", sshClientSecret,
			"--cc-api-url", st.CCURL(),
			"--loggregator-addr", lines.Addr(), "--loggregator-ca", files.CA, "--loggregator-cert", files.Cert,
			"--loggregator-key", files.Key, "--loggregator-server-name", lgstandin.ServerName,
		), GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
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
		Expect(json.NewDecoder(resp.Body).Decode(&prints)).To(Succeed())
		Expect(prints.SHA256).To(Equal(strings.TrimPrefix(ssh.FingerprintSHA256(hostKey), "SHA256:")))
		Expect(session.Out).To(gbytes.Say(`host-key.*` + regexp.QuoteMeta(prints.SHA256)))
	})

	goClient := func(code string, banner *gbytes.Buffer) (*ssh.Client, error) {
		if banner == nil {
			return sshstandin.Dial(proxyAddr, sshstandin.User(a.guid, 0), code, prints.MD5, nil)
		}
		return sshstandin.Dial(proxyAddr, sshstandin.User(a.guid, 0), code, prints.MD5, banner)
	}

	run := func(command string) (string, string, error) {
		client, err := goClient(sshCode, nil)
		Expect(err).NotTo(HaveOccurred())
		defer client.Close()
		session, err := client.NewSession()
		Expect(err).NotTo(HaveOccurred())
		var stdout, stderr bytes.Buffer
		session.Stdout, session.Stderr = &stdout, &stderr
		err = session.Run(command)
		return stdout.String(), stderr.String(), err
	}

	It("runs a command in the instance for a CLI-shaped client: its output, stderr apart, exit status 0", func() {
		stdout, stderr, err := run("echo hi; echo oops >&2")
		Expect(err).NotTo(HaveOccurred())
		Expect(stdout).To(Equal("hi\n"))
		Expect(stderr).To(Equal("oops\n"))
	})

	It("ends a failing command with a non-zero exit status", func() {
		_, _, err := run("exit 3")
		var exit *ssh.ExitError
		Expect(errors.As(err, &exit)).To(BeTrue(), fmt.Sprint(err))
		Expect(exit.ExitStatus()).NotTo(BeZero())
	})

	It("puts who came in and that they left into the app's log stream (source type SSH)", func() {
		client, err := goClient(sshCode, nil)
		Expect(err).NotTo(HaveOccurred())
		remote := client.LocalAddr().String()
		session, err := client.NewSession()
		Expect(err).NotTo(HaveOccurred())
		Expect(session.Run("true")).To(Succeed())
		Expect(client.Close()).To(Succeed())

		uid := string(livePod(namespace, a).UID)
		sshLines := func() []string {
			var got []string
			for _, env := range lines.Envelopes() {
				if env.GetTags()["source_type"] != "SSH" || !strings.HasSuffix(string(env.GetLog().GetPayload()), " "+remote) {
					continue
				}
				Expect(env.GetSourceId()).To(Equal("app-" + a.guid))
				Expect(env.GetInstanceId()).To(Equal("0"))
				Expect(env.GetTags()).To(Equal(map[string]string{
					"source_type": "SSH",
					"app_id":      "app-" + a.guid, "app_name": "Dora The App",
					"space_id": "space-1", "space_name": "dev",
					"organization_id": "org-1", "organization_name": "acme",
					"process_id": a.guid, "process_type": "web", "process_instance_id": uid,
				}))
				got = append(got, string(env.GetLog().GetPayload()))
			}
			return got
		}
		Eventually(sshLines, 30*time.Second, 100*time.Millisecond).Should(Equal([]string{
			"Successful remote access by " + remote,
			"Remote access ended for " + remote,
		}))
	})

	It("lets only the proxy's ServiceAccount exec into the apps' pods, not opi's", func() {
		Expect(canIAs(namespace, "opi-ssh-proxy", "create", "pods", "--subresource=exec", "-n", namespace)).To(Equal("yes"))
		Expect(canIAs(namespace, "opi", "create", "pods", "--subresource=exec", "-n", namespace)).To(Equal("no"))
		Expect(canIAs(namespace, "opi-ssh-proxy", "create", "pods", "--subresource=portforward", "-n", namespace)).To(Equal("yes"))
		Expect(canIAs(namespace, "opi", "create", "pods", "--subresource=portforward", "-n", namespace)).To(Equal("no"))
		Expect(canIAs(namespace, "opi-ssh-proxy", "get", "secrets", "-n", namespace)).To(Equal("no"))
	})

	It("refuses a wrong code with UAA's reason, before any exec", func() {
		banner := gbytes.NewBuffer()
		_, err := goClient("not-the-code", banner)
		Expect(err).To(MatchError(ContainSubstring("unable to authenticate")))
		Expect(banner).To(gbytes.Say("opi ssh-proxy: authentication failed: UAA did not accept the one-time code"))
	})

	Context("with OpenSSH's client", func() {
		var knownHosts, askpass string

		BeforeAll(func() {
			if _, err := exec.LookPath("ssh"); err != nil {
				Fail("OpenSSH's client (ssh) is missing: install openssh-client (.ci/run does when it runs as root)")
			}
			dir := GinkgoT().TempDir()
			host, port, err := net.SplitHostPort(proxyAddr)
			Expect(err).NotTo(HaveOccurred())
			knownHosts = filepath.Join(dir, "known_hosts")
			line := fmt.Sprintf("[%s]:%s %s", host, port, ssh.MarshalAuthorizedKey(hostKey))
			Expect(os.WriteFile(knownHosts, []byte(line), 0o600)).To(Succeed())
			// OpenSSH asks SSH_ASKPASS for the password (the code) when told to.
			askpass = filepath.Join(dir, "askpass")
			Expect(os.WriteFile(askpass, []byte("#!/bin/sh\necho "+sshCode+"\n"), 0o700)).To(Succeed())
		})

		sshCommand := func(args ...string) *exec.Cmd {
			host, port, err := net.SplitHostPort(proxyAddr)
			Expect(err).NotTo(HaveOccurred())
			cmd := exec.Command("ssh", append([]string{
				"-F", "none", "-p", port, "-l", sshstandin.User(a.guid, 0),
				"-o", "UserKnownHostsFile=" + knownHosts, "-o", "StrictHostKeyChecking=yes",
				"-o", "PreferredAuthentications=password", "-o", "PubkeyAuthentication=no",
				"-o", "NumberOfPasswordPrompts=1", "-o", "LogLevel=ERROR", host,
			}, args...)...)
			cmd.Env = append(os.Environ(), "SSH_ASKPASS="+askpass, "SSH_ASKPASS_REQUIRE=force", "DISPLAY=none")
			return cmd
		}
		openSSH := func(stdin string, args ...string) (string, string, error) {
			cmd := sshCommand(args...)
			cmd.Stdin = strings.NewReader(stdin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			return stdout.String(), stderr.String(), err
		}

		It("runs a command, stdout and stderr apart", func() {
			stdout, stderr, err := openSSH("", "echo hi; echo oops >&2")
			Expect(err).NotTo(HaveOccurred(), stderr)
			Expect(stdout).To(Equal("hi\n"))
			Expect(stderr).To(Equal("oops\n"))
		})

		It("runs an interactive shell under a pty (-tt)", func() {
			// Typed as a user types: the next line once the shell has answered the last. All of
			// it at once with the end of input would race the input's end against the shell
			// reading it (the pty hangs up on the shell when its input ends).
			cmd := sshCommand("-tt")
			stdin, err := cmd.StdinPipe()
			Expect(err).NotTo(HaveOccurred())
			stdout, stderr := gbytes.NewBuffer(), gbytes.NewBuffer()
			cmd.Stdout, cmd.Stderr = stdout, stderr
			Expect(cmd.Start()).To(Succeed())
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			_, err = io.WriteString(stdin, "echo $((6*7))\n")
			Expect(err).NotTo(HaveOccurred())
			Eventually(stdout, "30s").Should(gbytes.Say("42"))
			_, err = io.WriteString(stdin, "exit\n")
			Expect(err).NotTo(HaveOccurred())
			Expect(stdin.Close()).To(Succeed())
			Eventually(done, "30s").Should(Receive(BeNil()), func() string { return string(stderr.Contents()) })
		})
	})
})

var _ = Describe("The ssh-proxy kustomize component", func() {
	It("adds the proxy's Deployment, its Service on 2222 and its Role to an overlay; opi's Role gains no exec", func() {
		with := kustomizeWith("overlays/cf", "ssh-proxy")
		var svc corev1.Service
		Expect(yaml.Unmarshal(with["Service/opi-ssh-proxy"], &svc)).To(Succeed())
		Expect(svc.Spec.Ports).To(ConsistOf(HaveField("Port", int32(2222))))
		var d appsv1.Deployment
		Expect(yaml.Unmarshal(with["Deployment/opi-ssh-proxy"], &d)).To(Succeed())
		Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal("opi"), "the name an overlay's images entry sets, as for opi's own")
		Expect(with).To(HaveKey("Role/opi-ssh-proxy"))
		Expect(with).To(HaveKey("RoleBinding/opi-ssh-proxy"))
		Expect(with).To(HaveKey("NetworkPolicy/opi-ssh-proxy"))
		var opiRole rbacv1.Role
		Expect(yaml.Unmarshal(with["Role/opi"], &opiRole)).To(Succeed())
		Expect(opiRole.Rules).NotTo(BeEmpty())
		for _, rule := range opiRole.Rules {
			Expect(rule.Resources).NotTo(ContainElement(HavePrefix("pods/")))
		}
	})
})
