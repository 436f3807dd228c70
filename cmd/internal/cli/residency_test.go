package cli_test

import (
	"errors"
	"runtime"

	"code.cloudfoundry.org/lager/v3"
	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/cmd/internal/cli"
	"github.com/opi-bridge/opi/internal/residency"
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

	It("logs the released pages and, apart, why the page cache kept its part", func() {
		logger := lagertest.NewTestLogger("opi")
		cli.LogReleased(logger, "caches-synced", func() (residency.Result, error) {
			return residency.Result{Mappings: 3, Before: 30_000_000, After: 1_200_000, CachedBefore: -1, CachedAfter: -1,
				CacheErr: errors.New("open /opi: no such file or directory")}, nil
		})

		Expect(logger.Logs()).To(HaveLen(1))
		entry := logger.Logs()[0]
		Expect(entry.Message).To(Equal("opi.binary-pages-released"))
		Expect(entry.Data).To(HaveKeyWithValue("mappings", BeNumerically("==", 3)))
		Expect(entry.Data).To(HaveKeyWithValue("resident-mb-before", BeNumerically("==", 30)))
		Expect(entry.Data).To(HaveKeyWithValue("resident-mb-after", BeNumerically("==", 1.2)))
		Expect(entry.Data).To(HaveKeyWithValue("page-cache-error", "open /opi: no such file or directory"))
		Expect(entry.Data).NotTo(HaveKey("page-cache-mb-before"), "the cache was not counted")
	})

	It("logs that the pages were kept when nothing was released", func() {
		logger := lagertest.NewTestLogger("opi")
		cli.LogReleased(logger, "caches-synced", func() (residency.Result, error) {
			return residency.Result{}, errors.New("find the binary: no /proc")
		})

		Expect(logger.Logs()).To(HaveLen(1))
		Expect(logger.Logs()[0].Message).To(Equal("opi.binary-pages-kept"))
		Expect(logger.Logs()[0].Data).To(HaveKeyWithValue("error", "find the binary: no /proc"))
	})
})
