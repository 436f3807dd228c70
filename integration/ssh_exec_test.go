package integration_test

import (
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The proxy execs over WebSocket (every other SSH spec: the component's Role grants get on
// pods/exec) and falls back to SPDY where the API server refuses the upgrade.
var _ = Describe("cf ssh's commands where the proxy's Role has no get on pods/exec", Ordered, func() {
	var (
		proxy *sshProxy
		ns    string
	)

	BeforeAll(func() {
		ns = newNamespace()
		_, a := runningApp(ns)

		rbac := sshProxyRole()
		const execRule = "resources: [\"pods/exec\"]\n  verbs: [\"create\", \"get\"]"
		Expect(rbac).To(ContainSubstring(execRule))
		proxy = startSSHProxyWithRole(ns, a, strings.Replace(rbac, execRule, "resources: [\"pods/exec\"]\n  verbs: [\"create\"]", 1))
	})

	It("runs them over SPDY: the output, stderr apart, exit status 0", func() {
		Expect(canIAs(ns, "opi-ssh-proxy", "get", "pods", "--subresource=exec", "-n", ns)).To(Equal("no"))
		Expect(canIAs(ns, "opi-ssh-proxy", "create", "pods", "--subresource=exec", "-n", ns)).To(Equal("yes"))

		proxy.expectOutputsApart()
	})
})
