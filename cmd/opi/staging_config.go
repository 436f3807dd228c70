package main

import (
	"flag"
	"fmt"

	"github.com/opi-bridge/opi/imageconfig"
	"github.com/opi-bridge/opi/k8s"
)

// StagingConfig is the `staging` section: how docker staging reads images from registries.
type StagingConfig struct {
	// Timeout bounds one whole read of an image's manifest and config.
	Timeout Duration `json:"timeout"`
	// MaxManifestBytes and MaxConfigBytes bound the bytes read of each manifest and of the
	// config blob, whatever the registry declares.
	MaxManifestBytes int64 `json:"max_manifest_bytes"`
	MaxConfigBytes   int64 `json:"max_config_bytes"`
	// MaxAttempts and MaxAge bound a staging: past either it is settled as a StagingError
	// without reading.
	MaxAttempts int      `json:"max_attempts"`
	MaxAge      Duration `json:"max_age"`
	// RefusedCIDRs are ranges registries must not be in, besides loopback, link-local and the
	// private ranges (imageconfig.DefaultRefusedCIDRs): the cluster's pod and service ranges
	// when they are public addresses, say. AllowedCIDRs open ranges (or single addresses) of
	// either for registries; the most specific range decides.
	AllowedCIDRs []string `json:"allowed_cidrs"`
	RefusedCIDRs []string `json:"refused_cidrs"`
}

func defaultStagingConfig() StagingConfig {
	return StagingConfig{
		Timeout:          Duration{imageconfig.DefaultTimeout},
		MaxManifestBytes: imageconfig.DefaultMaxManifestBytes,
		MaxConfigBytes:   imageconfig.DefaultMaxConfigBytes,
		MaxAttempts:      k8s.DefaultStagingMaxAttempts,
		MaxAge:           Duration{k8s.DefaultStagingMaxAge},
	}
}

func (c *StagingConfig) bindFlags(fs *flag.FlagSet) {
	fs.Var(&c.Timeout, "staging-timeout", "how long one read of an image's manifest and config may take")
	fs.Int64Var(&c.MaxManifestBytes, "staging-max-manifest-bytes", c.MaxManifestBytes, "largest image manifest read")
	fs.Int64Var(&c.MaxConfigBytes, "staging-max-config-bytes", c.MaxConfigBytes, "largest image config read")
	fs.IntVar(&c.MaxAttempts, "staging-max-attempts", c.MaxAttempts, "reads of an image before its staging fails")
	fs.Var(&c.MaxAge, "staging-max-age", "age after which a staging not completed fails")
	fs.Var((*stringList)(&c.AllowedCIDRs), "staging-allowed-cidrs", "comma-separated ranges registries may be in despite the refused ones (e.g. 127.0.0.0/8 for a local registry)")
	fs.Var((*stringList)(&c.RefusedCIDRs), "staging-refused-cidrs", "comma-separated ranges registries must not be in, besides loopback, link-local and private ones (the cluster's pod and service ranges)")
}

func (c StagingConfig) validate() error {
	switch {
	case c.Timeout.Duration <= 0:
		return fmt.Errorf("staging.timeout must be positive")
	case c.MaxManifestBytes <= 0 || c.MaxConfigBytes <= 0:
		return fmt.Errorf("staging.max_manifest_bytes and staging.max_config_bytes must be positive")
	case c.MaxAttempts < 1:
		return fmt.Errorf("staging.max_attempts must be at least 1")
	case c.MaxAge.Duration <= 0:
		return fmt.Errorf("staging.max_age must be positive")
	}
	_, err := c.policy()
	return err
}

func (c StagingConfig) policy() (*imageconfig.AddressPolicy, error) {
	allowed, err := imageconfig.ParseCIDRs(c.AllowedCIDRs)
	if err != nil {
		return nil, fmt.Errorf("staging.allowed_cidrs: %w", err)
	}
	refused, err := imageconfig.ParseCIDRs(c.RefusedCIDRs)
	if err != nil {
		return nil, fmt.Errorf("staging.refused_cidrs: %w", err)
	}
	return imageconfig.NewAddressPolicy(allowed, refused), nil
}

// applyTo gives the backend its image reader and the stagings' bounds.
func (c StagingConfig) applyTo(opts *k8s.Options) error {
	policy, err := c.policy()
	if err != nil {
		return err
	}
	opts.Notifiers.ImageReader = &imageconfig.Reader{
		Timeout:          c.Timeout.Duration,
		MaxManifestBytes: c.MaxManifestBytes,
		MaxConfigBytes:   c.MaxConfigBytes,
		Policy:           policy,
	}
	opts.Staging.MaxAttempts = c.MaxAttempts
	opts.Staging.MaxAge = c.MaxAge.Duration
	return nil
}
