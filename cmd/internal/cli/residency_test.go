package cli_test

import (
	"runtime"

	"code.cloudfoundry.org/lager/v3"
	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/cmd/internal/cli"
)

var _ = Describe("Releasing the binary's start-up pages", func() {
	It("logs what it gave back and at which stage", func() {
		if runtime.GOOS != "linux" {
			Skip("the binary's pages are released on Linux only")
		}
		logger := lagertest.NewTestLogger("opi")
		cli.ReleaseStartupPages(logger, "caches-synced")

		Expect(logger.Logs()).To(HaveLen(1))
		entry := logger.Logs()[0]
		Expect(entry.Message).To(Equal("opi.binary-pages-released"))
		Expect(entry.LogLevel).To(Equal(lager.INFO))
		Expect(entry.Data).To(HaveKeyWithValue("after", "caches-synced"))
		Expect(entry.Data["mappings"]).To(BeNumerically(">=", 2))
		Expect(entry.Data["resident-mb-before"]).To(BeNumerically(">", entry.Data["resident-mb-after"]))
		Expect(entry.Data["page-cache-mb-before"]).To(BeNumerically(">", 0))
		Expect(entry.Data).To(HaveKey("page-cache-mb-after"))
	})
})
