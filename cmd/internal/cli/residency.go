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
// it (the log gives both, in MB).
func ReleaseStartupPages(logger lager.Logger, after string) {
	res, err := residency.Release()
	if err != nil {
		logger.Info("binary-pages-kept", lager.Data{"after": after, "error": err.Error()})
		return
	}
	data := lager.Data{
		"after": after, "mappings": res.Mappings,
		"resident-mb-before": megabytes(res.Before), "resident-mb-after": megabytes(res.After),
	}
	if res.CachedBefore >= 0 {
		data["page-cache-mb-before"], data["page-cache-mb-after"] = megabytes(res.CachedBefore), megabytes(res.CachedAfter)
	}
	logger.Info("binary-pages-released", data)
}

// megabytes is n bytes in MB, to a tenth.
func megabytes(n int64) float64 { return float64(n/100_000) / 10 }
