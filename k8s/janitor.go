package k8s

import (
	"context"

	"github.com/opi-bridge/opi/k8s/janitor"
)

// newJanitor builds the janitor (package k8s/janitor) from the options, with the hooks
// registered already; nil (logged) only when a dependency is missing, which NewBackend never
// leaves out.
func (b *Backend) newJanitor(opts Options) *janitor.Janitor {
	j, err := janitor.New(b.namespace, b.logger, janitor.Options{Period: opts.JanitorPeriod, Grace: opts.JanitorGrace},
		janitor.Deps{Client: b.client, Kind: b.kind, Cache: b.store, Hooks: b.hooks, Lists: b.listMetadata})
	if err != nil {
		b.logger.Error("janitor-not-run", err)
		return nil
	}
	return j
}

// Sweep is the janitor's sweep (see janitor.Janitor.Sweep), which RunLeaderWork runs every
// Options.JanitorPeriod.
func (b *Backend) Sweep(ctx context.Context) {
	if b.janitor != nil {
		b.janitor.Sweep(ctx)
	}
}
