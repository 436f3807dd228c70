package cli

import (
	"code.cloudfoundry.org/lager/v3"

	"github.com/opi-bridge/opi/internal/residency"
)

// ReleaseStartupPages gives back the pages of the command's binary that only its start-up
// touched (internal/residency): package initialisation (client-go's scheme and the other
// libraries' tables touch pages all over the binary), and whatever else ran once before the
// stage named after. What the command runs from then on comes back on first use; the rest no
// longer counts in its resident memory, and leaves the page cache unless another process maps
// it (the log gives both, in MB, and why the page cache's part was not dropped if it was not).
func ReleaseStartupPages(logger lager.Logger, after string) {
	logReleased(logger, after, residency.Release)
}

// logReleased logs what release did: binary-pages-kept when it released nothing.
func logReleased(logger lager.Logger, after string, release func() (residency.Result, error)) {
	res, err := release()
	if err != nil {
		logger.Info("binary-pages-kept", lager.Data{"after": after, "error": err.Error()})
		return
	}
	data := lager.Data{"after": after, "mappings": res.Mappings, "resident-mb-before": megabytes(res.Before)}
	if res.After >= 0 {
		data["resident-mb-after"] = megabytes(res.After)
	}
	if res.CachedBefore >= 0 {
		data["page-cache-mb-before"], data["page-cache-mb-after"] = megabytes(res.CachedBefore), megabytes(res.CachedAfter)
	}
	if res.CacheErr != nil {
		data["page-cache-error"] = res.CacheErr.Error()
	}
	logger.Info("binary-pages-released", data)
}

// megabytes is n bytes in MB, to a tenth.
func megabytes(n int64) float64 { return float64(n/100_000) / 10 }
