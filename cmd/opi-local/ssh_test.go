package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	"github.com/opi-bridge/opi/testsupport/sshlocal"
)

var _ = Describe("make run's SSH proxy", func() {
	proxy := &sshlocal.Proxy{
		Addr: "127.0.0.1:2222", OpsAddr: "127.0.0.1:41001", SHA256: "SHA256:abc", MD5: "aa:bb",
		KnownHosts: "/run/ssh/known_hosts", Askpass: "/run/ssh/askpass", Log: "/run/ssh/opi-ssh-proxy.log",
	}
	ssh := "SSH_ASKPASS=/run/ssh/askpass SSH_ASKPASS_REQUIRE=force ssh -p 2222 -o UserKnownHostsFile=/run/ssh/known_hosts " +
		"-o StrictHostKeyChecking=yes -o PreferredAuthentications=password "
	user := "cf:" + exampleGUID + "/0@127.0.0.1"

	It("prints OpenSSH commands into the example app's instance 0: a command, a shell, a tunnel; the fingerprints and the code", func() {
		var out bytes.Buffer
		printGuide(&out, guide{Base: "http://127.0.0.1:8085", SSH: &sshGuide{proxy: proxy}})
		Expect(out.String()).To(And(
			ContainSubstring("  "+ssh+user+" 'echo hi from $(pwd)'\n"),
			ContainSubstring("  "+ssh+"-t "+user+"\n"),
			ContainSubstring("  "+ssh+"-N -L 8081:localhost:8080 "+user+"\n"),
			ContainSubstring("curl -sS localhost:8081"),
			ContainSubstring("app_ssh.host_key_fingerprint: SHA256:abc (MD5:aa:bb)"),
			ContainSubstring("curl -sS http://127.0.0.1:41001/fingerprints"),
			ContainSubstring("the one-time code "+sshlocal.Code),
			ContainSubstring("Without --agent the proxy sends no SSH lines"),
		))
		Expect(out.String()).To(MatchRegexp(`(?s)Ctrl-C stops the ssh proxy.*cf ssh: opi ssh-proxy listens at 127.0.0.1:2222`))
	})

	It("says where the SSH lines are printed with --agent", func() {
		var out bytes.Buffer
		printGuide(&out, guide{Base: "http://127.0.0.1:8085", SSH: &sshGuide{proxy: proxy, lines: true}})
		Expect(out.String()).To(ContainSubstring("loggregator-standin: <app guid> [0] SSH OUT Successful remote access by 127.0.0.1:<port>"))
	})

	It("has kwok forward the instances' port 8080 to a loopback server answering for the app", func() {
		srv, config := startAppPort("cf-workloads")
		DeferCleanup(srv.Close)
		var forward struct {
			Kind string
			Spec struct {
				Selector struct{ MatchNamespaces []string }
				Forwards []struct {
					Ports  []int
					Target struct {
						Address string
						Port    int
					}
				}
			}
		}
		Expect(yaml.Unmarshal([]byte(config), &forward)).To(Succeed())
		Expect(forward.Kind).To(Equal("ClusterPortForward"))
		Expect(forward.Spec.Selector.MatchNamespaces).To(Equal([]string{"cf-workloads"}))
		Expect(forward.Spec.Forwards).To(HaveLen(1))
		f := forward.Spec.Forwards[0]
		Expect(f.Ports).To(Equal([]int{8080}))
		Expect(net.JoinHostPort(f.Target.Address, fmt.Sprint(f.Target.Port))).To(Equal(srv.Listener.Addr().String()))

		resp, err := http.Get(srv.URL)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(body)).To(Equal(appPortAnswer))
	})

	It("quotes a command for the shell", func() {
		Expect(proxy.Command("g", 1, nil, "echo 'it''s'")).To(HaveSuffix(` cf:g/1@127.0.0.1 'echo '\''it'\'''\''s'\'''`))
	})
})
