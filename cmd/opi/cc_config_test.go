package main

import (
	"os"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/cc"
)

var _ = Describe("the cc section's callback endpoints", func() {
	BeforeEach(func() { GinkgoT().Setenv("KUBECONFIG", "") })

	writeConfig := func(yaml string) string {
		path := filepath.Join(GinkgoT().TempDir(), "opi.yml")
		Expect(os.WriteFile(path, []byte(yaml), 0o600)).To(Succeed())
		return path
	}

	It("allows none by default and delivers at most cc.DefaultMaxPerEndpoint at once to each", func() {
		cfg, err := LoadConfig(nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.CC.CallbackURLs).To(BeEmpty())
		Expect(cfg.CC.MaxDeliveriesPerEndpoint).To(Equal(cc.DefaultMaxPerEndpoint))
	})

	It("reads callback_urls and max_deliveries_per_endpoint from the file", func() {
		path := writeConfig("cc:\n  callback_urls: [\"https://cc-a:9023\", \"https://cc-b:9023\"]\n  max_deliveries_per_endpoint: 3\n")
		cfg, err := LoadConfig([]string{"--config", path})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.CC.CallbackURLs).To(Equal([]string{"https://cc-a:9023", "https://cc-b:9023"}))
		Expect(cfg.CC.MaxDeliveriesPerEndpoint).To(Equal(3))
	})

	It("takes --cc-callback-url repeated or comma-separated, replacing the file's list", func() {
		path := writeConfig("cc:\n  callback_urls: [\"https://from-file:9023\"]\n")
		cfg, err := LoadConfig([]string{"--config", path, "--cc-callback-url", "https://a:1, https://b:2", "--cc-callback-url", "https://c:3"})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.CC.CallbackURLs).To(Equal([]string{"https://a:1", "https://b:2", "https://c:3"}))
	})

	It("refuses max_deliveries_per_endpoint below 1", func() {
		_, err := LoadConfig([]string{"--cc-max-deliveries-per-endpoint", "0"})
		Expect(err).To(MatchError(ContainSubstring("cc.max_deliveries_per_endpoint")))
	})
})
