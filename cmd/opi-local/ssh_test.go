package main

import (
	"bytes"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

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

	It("quotes a command for the shell", func() {
		Expect(proxy.Command("g", 1, nil, "echo 'it''s'")).To(HaveSuffix(` cf:g/1@127.0.0.1 'echo '\''it'\'''\''s'\'''`))
	})
})
