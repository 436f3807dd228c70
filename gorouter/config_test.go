package gorouter_test

import (
	"os"
	"path/filepath"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/gorouter"
	"github.com/opi-bridge/opi/testsupport/pki"
)

var _ = Describe("Config", func() {
	var dir, caFile, certFile, keyFile, passwordFile string

	BeforeEach(func() {
		dir = GinkgoT().TempDir()
		ca, err := pki.NewCA("nats-ca")
		Expect(err).NotTo(HaveOccurred())
		caFile, err = ca.WriteCert(dir, "ca")
		Expect(err).NotTo(HaveOccurred())
		pair, err := ca.Client("opi")
		Expect(err).NotTo(HaveOccurred())
		certFile, keyFile, err = pair.Write(dir, "client")
		Expect(err).NotTo(HaveOccurred())
		passwordFile = filepath.Join(dir, "password")
		Expect(os.WriteFile(passwordFile, []byte("s3cret\n"), 0o600)).To(Succeed())
	})

	It("accepts URLs with and without credentials, a password file, a CA and a client certificate", func() {
		cfg := gorouter.Config{
			URLs: []string{"nats://opi:pw@10.0.0.1:4222,nats://10.0.0.2:4222", "tls://nats.service.cf.internal:4224"},
			User: "nats", PasswordFile: passwordFile, CAFile: caFile, CertFile: certFile, KeyFile: keyFile,
		}
		Expect(cfg.Validate()).To(Succeed())
		_, err := gorouter.NewEmitter(cfg, lagertest.NewTestLogger("test"), nil)
		Expect(err).NotTo(HaveOccurred())
	})

	It("logs URLs without their passwords", func() {
		cfg := gorouter.Config{URLs: []string{"nats://opi:pw@10.0.0.1:4222", "nats://10.0.0.2:4222"}}
		Expect(cfg.RedactedURLs()).To(Equal([]string{"nats://opi:xxxxx@10.0.0.1:4222", "nats://10.0.0.2:4222"}))
	})

	DescribeTable("refuses what cannot work, with a clear error that holds no password",
		func(change func(*gorouter.Config), message string) {
			cfg := gorouter.Config{URLs: []string{"nats://10.0.0.1:4222"}}
			change(&cfg)
			err := cfg.Validate()
			Expect(err).To(MatchError(ContainSubstring(message)))
			Expect(err.Error()).NotTo(ContainSubstring("hunter2"))
			_, err = gorouter.NewEmitter(cfg, lagertest.NewTestLogger("test"), nil)
			Expect(err).To(MatchError(ContainSubstring(message)))
		},
		Entry("no URL", func(c *gorouter.Config) { c.URLs = nil }, "no server URL"),
		Entry("only commas", func(c *gorouter.Config) { c.URLs = []string{" , "} }, "no server URL"),
		Entry("http", func(c *gorouter.Config) { c.URLs = []string{"http://u:hunter2@10.0.0.1:4222"} }, "must be nats:// or tls://"),
		Entry("no scheme", func(c *gorouter.Config) { c.URLs = []string{"10.0.0.1:4222"} }, "nats"),
		Entry("no port", func(c *gorouter.Config) { c.URLs = []string{"nats://u:hunter2@10.0.0.1"} }, "host and port are required"),
		Entry("a path", func(c *gorouter.Config) { c.URLs = []string{"nats://10.0.0.1:4222/x"} }, "a path or query"),
		Entry("a URL that does not parse", func(c *gorouter.Config) { c.URLs = []string{"nats://u:hunter2@[::1"} }, "does not parse"),
		Entry("password and password file", func(c *gorouter.Config) {
			c.Password, c.PasswordFile = "hunter2", passwordFile
		}, "password and password file are both set"),
		Entry("an unreadable password file", func(c *gorouter.Config) { c.PasswordFile = filepath.Join(dir, "none") }, "read password file"),
		Entry("a certificate without key", func(c *gorouter.Config) { c.CertFile = certFile }, "go together"),
		Entry("a key without certificate", func(c *gorouter.Config) { c.KeyFile = keyFile }, "go together"),
		Entry("an unreadable CA file", func(c *gorouter.Config) { c.CAFile = filepath.Join(dir, "none") }, "read ca file"),
		Entry("a CA file without PEM", func(c *gorouter.Config) { c.CAFile = passwordFile }, "holds no PEM certificate"),
		Entry("an unreadable certificate", func(c *gorouter.Config) {
			c.CertFile, c.KeyFile = filepath.Join(dir, "none"), keyFile
		}, "load client certificate"),
		Entry("a certificate and a key that do not match", func(c *gorouter.Config) {
			c.CertFile, c.KeyFile = certFile, caFile
		}, "load client certificate"),
		Entry("a negative interval", func(c *gorouter.Config) { c.DefaultRegisterInterval = -1 }, "negative"),
	)
})
