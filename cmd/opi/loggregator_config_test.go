package main

import (
	"os"
	"path/filepath"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/loggregator"
)

var _ = Describe("The loggregator configuration (lifecycle lines)", func() {
	BeforeEach(func() { GinkgoT().Setenv("KUBECONFIG", "") })

	It("maps the section to the Sender's config, the flags overriding the file", func() {
		path := writeConfigFile(`
loggregator:
  addr: doppler.service.cf.internal:8082
  server_name: doppler
  tls:
    ca_file: /etc/opi/loggregator/ca.crt
    cert_file: /etc/opi/loggregator/tls.crt
    key_file: /etc/opi/loggregator/tls.key
`)
		cfg, err := LoadConfig([]string{"--config", path, "--loggregator-addr", "10.0.0.5:8082", "--loggregator-key", "/tmp/key.pem"})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Loggregator.sender()).To(Equal(loggregator.SenderConfig{
			Addr: "10.0.0.5:8082", ServerName: "doppler",
			CAFile: "/etc/opi/loggregator/ca.crt", CertFile: "/etc/opi/loggregator/tls.crt", KeyFile: "/tmp/key.pem",
		}))
	})

	It("is optional: without it no Sender is wired", func() {
		cfg, err := LoadConfig([]string{"--config", writeConfigFile("{}\n")})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Loggregator.set()).To(BeFalse())
	})

	It("refuses a half-set section with the keys missing", func() {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--loggregator-addr", "10.0.0.5:8082", "--loggregator-ca", "/ca"},
				"loggregator needs mutual TLS: set [loggregator.tls.cert_file (--loggregator-cert) loggregator.tls.key_file (--loggregator-key)]"},
			{[]string{"--loggregator-ca", "/ca", "--loggregator-cert", "/c", "--loggregator-key", "/k"},
				"loggregator.tls and loggregator.server_name need loggregator.addr (--loggregator-addr)"},
			{[]string{"--loggregator-addr", "doppler", "--loggregator-ca", "/ca", "--loggregator-cert", "/c", "--loggregator-key", "/k"},
				`loggregator.addr "doppler" is not host:port`},
		} {
			_, err := LoadConfig(append([]string{"--config", writeConfigFile("{}\n")}, c.args...))
			Expect(err).To(MatchError(ContainSubstring(c.want)), "%v", c.args)
		}
	})

	It("refuses at start-up TLS files that cannot be read, and wires nothing without the section", func() {
		bad := filepath.Join(GinkgoT().TempDir(), "ca.pem")
		Expect(os.WriteFile(bad, []byte("not a certificate"), 0o600)).To(Succeed())
		var opts k8s.Options
		_, err := wireLoggregator(LoggregatorConfig{Addr: "127.0.0.1:1", TLS: LoggregatorTLSConfig{CAFile: bad, CertFile: bad, KeyFile: bad}},
			lagertest.NewTestLogger("opi"), &opts)
		Expect(err).To(MatchError(ContainSubstring("loggregator: load loggregator TLS files")))
		Expect(opts.Clients.Lifecycle).To(BeNil())
		stop, err := wireLoggregator(LoggregatorConfig{}, lagertest.NewTestLogger("opi"), &opts)
		Expect(err).NotTo(HaveOccurred())
		stop()
		Expect(opts.Clients.Lifecycle).To(BeNil())
	})
})
