package main

import (
	"net/netip"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/imageconfig"
	"github.com/opi-bridge/opi/k8s"
)

var _ = Describe("staging configuration", func() {
	writeConfig := func(yaml string) string {
		path := filepath.Join(GinkgoT().TempDir(), "opi.yml")
		Expect(os.WriteFile(path, []byte(yaml), 0o600)).To(Succeed())
		return path
	}
	reader := func(cfg Config) (*imageconfig.Reader, k8s.Options) {
		var opts k8s.Options
		Expect(cfg.Staging.applyTo(&opts)).To(Succeed())
		r, ok := opts.Notifiers.ImageReader.(*imageconfig.Reader)
		Expect(ok).To(BeTrue())
		return r, opts
	}

	It("defaults to 4 MiB manifests and configs, 30s reads, 5 attempts, 15 minutes, private ranges refused", func() {
		cfg, err := LoadConfig(nil)
		Expect(err).NotTo(HaveOccurred())
		r, opts := reader(cfg)
		Expect(r.MaxManifestBytes).To(Equal(int64(4 << 20)))
		Expect(r.MaxConfigBytes).To(Equal(int64(4 << 20)))
		Expect(r.Timeout).To(Equal(30 * time.Second))
		Expect(opts.Staging.MaxAttempts).To(Equal(5))
		Expect(opts.Staging.MaxAge).To(Equal(15 * time.Minute))
		Expect(r.Policy.Allows(netip.MustParseAddr("127.0.0.1"))).To(BeFalse())
		Expect(r.Policy.Allows(netip.MustParseAddr("169.254.169.254"))).To(BeFalse())
		Expect(r.Policy.Allows(netip.MustParseAddr("8.8.8.8"))).To(BeTrue())
	})

	It("reads the staging section, and the flags win", func() {
		path := writeConfig("staging:\n  timeout: 10s\n  max_manifest_bytes: 1024\n  max_config_bytes: 2048\n  max_attempts: 3\n  max_age: 1h\n" +
			"  allowed_cidrs: [10.1.0.0/16]\n  refused_cidrs: [203.0.113.0/24]\n")
		cfg, err := LoadConfig([]string{"--config", path, "--staging-allowed-cidrs", "127.0.0.0/8, 10.2.0.0/16", "--staging-max-attempts", "2"})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Staging.AllowedCIDRs).To(Equal([]string{"127.0.0.0/8", "10.2.0.0/16"}))
		r, opts := reader(cfg)
		Expect(r.Timeout).To(Equal(10 * time.Second))
		Expect(r.MaxManifestBytes).To(Equal(int64(1024)))
		Expect(r.MaxConfigBytes).To(Equal(int64(2048)))
		Expect(opts.Staging.MaxAttempts).To(Equal(2))
		Expect(opts.Staging.MaxAge).To(Equal(time.Hour))
		Expect(r.Policy.Allows(netip.MustParseAddr("127.0.0.1"))).To(BeTrue())
		Expect(r.Policy.Allows(netip.MustParseAddr("10.1.0.1"))).To(BeFalse())
		Expect(r.Policy.Allows(netip.MustParseAddr("10.2.0.1"))).To(BeTrue())
		Expect(r.Policy.Allows(netip.MustParseAddr("203.0.113.5"))).To(BeFalse())
	})

	DescribeTable("rejects mistakes",
		func(file string, args []string, message string) {
			if file != "" {
				args = append(args, "--config", writeConfig(file))
			}
			_, err := LoadConfig(args)
			Expect(err).To(MatchError(ContainSubstring(message)))
		},
		Entry("a bad CIDR", "", []string{"--staging-allowed-cidrs", "10.0.0.0/40"}, `staging.allowed_cidrs: "10.0.0.0/40" is not a CIDR`),
		Entry("a bad refused CIDR", "staging:\n  refused_cidrs: [pods]\n", nil, "staging.refused_cidrs"),
		Entry("no attempts", "", []string{"--staging-max-attempts", "0"}, "staging.max_attempts"),
		Entry("no config bytes", "staging:\n  max_config_bytes: 0\n", nil, "staging.max_manifest_bytes and staging.max_config_bytes"),
		Entry("no age", "", []string{"--staging-max-age", "0s"}, "staging.max_age"),
	)
})
