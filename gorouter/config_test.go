package gorouter_test

import (
	"os"
	"path/filepath"
	"time"

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

	It("logs URLs without their user and password", func() {
		cfg := gorouter.Config{URLs: []string{"nats://opi:pw@10.0.0.1:4222", "tls://nats.example.com:4224,nats://10.0.0.2:4222"}}
		Expect(cfg.RedactedURLs()).To(Equal([]string{"nats://10.0.0.1:4222", "tls://nats.example.com:4224", "nats://10.0.0.2:4222"}))
	})

	It("waits longer after every failed round of reconnects, up to 10 s, with up to half as much again at random", func() {
		for range 20 {
			Expect(gorouter.ReconnectDelay(1)).To(And(BeNumerically(">=", 250*time.Millisecond), BeNumerically("<=", 375*time.Millisecond)))
			Expect(gorouter.ReconnectDelay(3)).To(And(BeNumerically(">=", time.Second), BeNumerically("<=", 1500*time.Millisecond)))
			Expect(gorouter.ReconnectDelay(1000)).To(And(BeNumerically(">=", 10*time.Second), BeNumerically("<=", 15*time.Second)))
		}
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
		Entry("an interval below the floor", func(c *gorouter.Config) { c.DefaultRegisterInterval = 10 * time.Millisecond }, "below the floor of 1s"),
		Entry("a password in the clear off loopback", func(c *gorouter.Config) { c.User, c.Password = "nats", "hunter2" }, "refusing to send a password in the clear to 10.0.0.1"),
		Entry("a password file in the clear off loopback", func(c *gorouter.Config) { c.PasswordFile = passwordFile }, "refusing to send a password in the clear"),
		Entry("a URL's password in the clear off loopback", func(c *gorouter.Config) {
			c.URLs = []string{"nats://127.0.0.1:4222,nats://u:hunter2@nats.example.com:4222"}
		}, "refusing to send a password in the clear to nats.example.com"),
		Entry("a URL's token in the clear off loopback", func(c *gorouter.Config) { c.URLs = []string{"nats://hunter2@10.0.0.1:4222"} }, "refusing to send a password in the clear"),
	)

	DescribeTable("lets a password go only over TLS, to loopback, or when allowed in so many words",
		func(change func(*gorouter.Config)) {
			cfg := gorouter.Config{URLs: []string{"nats://nats:hunter2@10.0.0.1:4222"}}
			change(&cfg)
			Expect(cfg.Validate()).To(Succeed())
		},
		Entry("a tls:// URL in the list: TLS for every server", func(c *gorouter.Config) { c.URLs = append(c.URLs, "tls://10.0.0.2:4224") }),
		Entry("a CA file", func(c *gorouter.Config) { c.CAFile = caFile }),
		Entry("a client certificate", func(c *gorouter.Config) { c.CertFile, c.KeyFile = certFile, keyFile }),
		Entry("loopback", func(c *gorouter.Config) {
			c.URLs = []string{"nats://nats:hunter2@127.0.0.1:4222", "nats://nats:hunter2@localhost:4222,nats://nats:hunter2@[::1]:4222"}
		}),
		Entry("allowed", func(c *gorouter.Config) { c.AllowPlaintextPassword = true }),
		Entry("no credentials at all", func(c *gorouter.Config) { c.URLs = []string{"nats://10.0.0.1:4222"}; c.User = "nats" }),
	)
})
