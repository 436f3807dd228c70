package k8s

import (
	"context"

	"github.com/opi-bridge/opi/k8s/staging"
	"github.com/opi-bridge/opi/opi"
)

var _ opi.Stager = (*Backend)(nil)

// Stage records the staging (package k8s/staging).
func (b *Backend) Stage(ctx context.Context, s *opi.Staging) error {
	return b.staging.Stage(ctx, s)
}

// newStaging builds the staging service from opts. Options.Validate refuses its dependencies
// half given; a backend made without validating keeps recording stagings, without the leader's
// work, and says so.
func (b *Backend) newStaging(opts Options) *staging.Service {
	settings := staging.Options{Workers: opts.StagingWorkers, MaxAttempts: opts.StagingMaxAttempts, MaxAge: opts.StagingMaxAge}
	deps := staging.Deps{Client: b.client, ImageReader: opts.ImageReader, Notifier: opts.StagingNotifier}
	s, err := staging.New(b.namespace, b.logger, settings, deps)
	if err != nil {
		b.logger.Error("staging-not-run", err)
		s, err = staging.New(b.namespace, b.logger, settings, staging.Deps{Client: b.client})
	}
	if err != nil {
		panic(err) // only a nil client, which no backend can work with
	}
	return s
}
