package integration_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"golang.org/x/crypto/ssh"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	lgstandin "github.com/opi-bridge/opi/testsupport/loggregator"
	"github.com/opi-bridge/opi/testsupport/sshstandin"
)

var _ = Describe("cf ssh through opi ssh-proxy", Ordered, func() {
	var (
		a         *app
		proxy     *sshProxy
		namespace string
		lines     *lgstandin.Server
	)

	BeforeAll(func() {
		ns := newNamespace()
		_, a = runningApp(ns)
		namespace = ns

		var err error
		lines, err = lgstandin.Start(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(lines.Stop)
		files := lines.ClientFiles()
		proxy = startSSHProxy(ns, a,
			"--loggregator-addr", lines.Addr(), "--loggregator-ca", files.CA, "--loggregator-cert", files.Cert,
			"--loggregator-key", files.Key, "--loggregator-server-name", lgstandin.ServerName)
	})

	It("runs a command in the instance for a CLI-shaped client: its output, stderr apart, exit status 0", func() {
		proxy.expectOutputsApart()
	})

	It("ends a failing command with a non-zero exit status", func() {
		_, _, err := proxy.run("exit 3")
		var exit *ssh.ExitError
		Expect(errors.As(err, &exit)).To(BeTrue(), fmt.Sprint(err))
		Expect(exit.ExitStatus()).NotTo(BeZero())
	})

	It("puts who came in and that they left into the app's log stream (source type SSH)", func() {
		client, err := proxy.dial(sshCode, nil)
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
		_, err := proxy.dial("not-the-code", banner)
		Expect(err).To(MatchError(ContainSubstring("unable to authenticate")))
		Expect(banner).To(gbytes.Say("opi ssh-proxy: authentication failed: UAA did not accept the one-time code"))
	})

	Context("with OpenSSH's client", func() {
		var openssh *sshstandin.OpenSSH

		BeforeAll(func() { openssh = proxy.openSSH() })

		openSSH := func(stdin string, args ...string) (string, string, error) {
			cmd := openssh.Command(args...)
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
			cmd := openssh.Command("-tt")
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
