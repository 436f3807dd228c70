package integration_test

import (
	"bytes"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/opi-bridge/opi/testsupport/sshstandin"
)

// The files of an instance through opi ssh-proxy with OpenSSH's sftp and scp. kwok runs the
// instance's exec'd commands on this machine, in the cluster's exec folder, so this machine's
// sftp-server and scp answer, and the files land in that folder.
var _ = Describe("Files through opi ssh-proxy: OpenSSH's sftp and scp", Ordered, func() {
	var (
		a  *app
		ns string
		o  *sshstandin.OpenSSH
	)

	BeforeAll(func() {
		ns = newNamespace()
		_, a = runningApp(ns)
		o = startSSHProxy(ns, a).openSSH()
	})

	// local is a folder of this spec holding up.bin, bytes enough for many SSH windows.
	local := func() (string, []byte) {
		dir := GinkgoT().TempDir()
		data := make([]byte, 3<<20)
		_, err := rand.Read(data)
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dir, "up.bin"), data, 0o600)).To(Succeed())
		return dir, data
	}
	// remote is a fresh file name in the instance (its working folder), removed after the spec.
	remote := func() string {
		name := "files-" + utilrand.String(8) + ".bin"
		DeferCleanup(func() { _ = os.Remove(filepath.Join(cluster.ExecDir(), name)) })
		return name
	}
	// transfer runs one of OpenSSH's programs in dir to its end, a success or not as said.
	transfer := func(dir string, succeeds bool, cmd *exec.Cmd) *gexec.Session {
		GinkgoHelper()
		cmd.Dir = dir
		session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { session.Kill() })
		Eventually(session, "2m").Should(gexec.Exit(), "%s did not end", cmd.Args[0])
		Expect(session.ExitCode() == 0).To(Equal(succeeds), func() string { return string(session.Err.Contents()) })
		return session
	}
	sameBytes := func(path string, data []byte) {
		GinkgoHelper()
		got, err := os.ReadFile(path)
		Expect(err).NotTo(HaveOccurred())
		Expect(bytes.Equal(got, data)).To(BeTrue(), "%s: %d bytes, not the %d sent", path, len(got), len(data))
	}
	sftpBatch := func(dir, commands string) string {
		batch := filepath.Join(dir, "batch")
		Expect(os.WriteFile(batch, []byte(commands), 0o600)).To(Succeed())
		return batch
	}

	It("puts a file with sftp and gets it back, the same bytes, through the instance", func() {
		dir, data := local()
		name := remote()
		batch := sftpBatch(dir, "put up.bin "+name+"\nget "+name+" back.bin\n")
		transfer(dir, true, o.Program("sftp", "-b", batch, o.Host()))
		sameBytes(filepath.Join(cluster.ExecDir(), name), data)
		sameBytes(filepath.Join(dir, "back.bin"), data)
	})

	It("copies a file to the instance and back with scp (through sftp, scp's default)", func() {
		dir, data := local()
		name := remote()
		transfer(dir, true, o.Program("scp", "up.bin", o.Host()+":"+name))
		sameBytes(filepath.Join(cluster.ExecDir(), name), data)
		transfer(dir, true, o.Program("scp", o.Host()+":"+name, "back.bin"))
		sameBytes(filepath.Join(dir, "back.bin"), data)
	})

	It("copies a file to the instance and back with legacy scp (scp -O: scp's own protocol)", func() {
		dir, data := local()
		name := remote()
		transfer(dir, true, o.Program("scp", "-O", "up.bin", o.Host()+":"+name))
		sameBytes(filepath.Join(cluster.ExecDir(), name), data)
		transfer(dir, true, o.Program("scp", "-O", o.Host()+":"+name, "back.bin"))
		sameBytes(filepath.Join(dir, "back.bin"), data)
	})

	It("refuses sftp, and scp through it, with a clear message when the instance has no sftp-server", func() {
		refusing := startSSHProxy(ns, a, "--sftp-server-paths", "/nonexistent/sftp-server,/nonexistent/libexec/sftp-server").openSSH()
		message := regexp.QuoteMeta("opi ssh-proxy: sftp (and scp, which uses it) is not available in instance 0: " +
			"the image has no sftp-server (looked for /nonexistent/sftp-server, /nonexistent/libexec/sftp-server)")
		dir, _ := local()
		name := remote()

		session := transfer(dir, false, refusing.Program("sftp", "-b", sftpBatch(dir, "put up.bin "+name+"\n"), refusing.Host()))
		Expect(session.Err).To(gbytes.Say(message))
		Expect(session.Err).To(gbytes.Say("subsystem request failed"))

		session = transfer(dir, false, refusing.Program("scp", "up.bin", refusing.Host()+":"+name))
		Expect(session.Err).To(gbytes.Say(message))
		Expect(filepath.Join(cluster.ExecDir(), name)).NotTo(BeAnExistingFile())

		// Legacy scp needs no sftp-server: the same proxy copies with it.
		transfer(dir, true, refusing.Program("scp", "-O", "up.bin", refusing.Host()+":"+name))
		Expect(filepath.Join(cluster.ExecDir(), name)).To(BeARegularFile())
	})
})
