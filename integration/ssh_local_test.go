package integration_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/testsupport/sshlocal"
)

// What `make run` starts and prints for cf ssh (cmd/opi-local): the proxy with the stand-ins as
// the component's ServiceAccount, and OpenSSH command lines, run here as a user pastes them.
var _ = Describe("make run's SSH proxy and the ssh commands it prints", Ordered, func() {
	var (
		a     *app
		proxy *sshlocal.Proxy
	)

	BeforeAll(func() {
		requireOpenSSH()
		ns := newNamespace()
		_, a = runningApp(ns)

		var err error
		proxy, err = sshlocal.Start(context.Background(), cluster, sshlocal.Options{
			OpiBin: opiBin, Namespace: ns, Backend: testBackend, RBAC: sshProxyRole(),
			Dir: filepath.Join(GinkgoT().TempDir(), "ssh-proxy"), Grants: map[string]string{a.guid: a.processGUID()},
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(proxy.Stop()).To(Succeed(), "the proxy did not stop cleanly on SIGTERM") })
	})

	shell := func(line string) (string, string, error) {
		cmd := exec.Command("bash", "-c", line)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}

	It("runs the printed command in the instance, the code from the askpass script, the host key from known_hosts", func() {
		stdout, stderr, err := shell(proxy.Command(a.guid, 0, nil, "echo hi; echo oops >&2"))
		Expect(err).NotTo(HaveOccurred(), stderr)
		Expect(stdout).To(Equal("hi\n"))
		Expect(stderr).To(Equal("oops\n"))
	})

	It("refuses a process the Cloud Controller stand-in does not grant, with CC's status", func() {
		_, stderr, err := shell(proxy.Command("not-"+a.guid, 0, nil, "echo hi"))
		Expect(err).To(HaveOccurred())
		Expect(stderr).To(ContainSubstring("opi ssh-proxy: access denied: Cloud Controller refused SSH to instance 0 of process not-" + a.guid + " (404)"))
	})

	It("refuses a host key other than the one known_hosts holds", func() {
		Expect(os.WriteFile(proxy.KnownHosts+".other", []byte("[127.0.0.1]:1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n"), 0o600)).To(Succeed())
		other := *proxy
		other.KnownHosts += ".other"
		_, stderr, err := shell(other.Command(a.guid, 0, nil, "echo hi"))
		Expect(err).To(HaveOccurred())
		Expect(stderr).To(ContainSubstring("Host key verification failed"))
	})
})
