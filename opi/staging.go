package opi

import (
	"context"
	"time"
)

// Staging is a docker staging Cloud Controller asked for: read Image's configuration from its
// registry and tell CC, at CallbackURL, what the image runs. See README.md, "Staging".
type Staging struct {
	// GUID is CC's staging guid.
	GUID      string
	AppGUID   string
	AppName   string
	SpaceGUID string
	OrgGUID   string
	// Image is the image reference as CC gave it.
	Image string
	// PrivateRegistry holds the credentials to read Image, nil for a public image. Password is a
	// secret.
	PrivateRegistry *PrivateRegistry
	// CallbackURL is CC's completion_callback.
	CallbackURL string
}

// Stager accepts stagings.
//
//counterfeiter:generate -o ../fakes/stager.go . Stager
type Stager interface {
	// Stage records the staging durably and returns; the result reaches CC later, also after a
	// restart of the bridge. Staging a guid that is still pending changes nothing and succeeds.
	Stage(ctx context.Context, staging *Staging) error
}

// ImageConfig is what an image's configuration says about running it.
type ImageConfig struct {
	Cmd        []string
	Entrypoint []string
	WorkingDir string
	User       string
	// Ports are the exposed ports, ordered by number then protocol.
	Ports []ImagePort
}

// ImagePort is one exposed port of an image.
type ImagePort struct {
	Port int32
	// Protocol is "tcp" or "udp".
	Protocol string
}

// ImageReader reads an image's configuration from its registry.
//
//counterfeiter:generate -o ../fakes/image_reader.go . ImageReader
type ImageReader interface {
	// ReadImageConfig reads image's configuration, with registry's credentials when not nil.
	// Its error's message is short and fit for CC (an unknown image, refused credentials, an
	// unreachable registry) and never holds a credential; when ctx ends first the error wraps
	// ctx.Err().
	ReadImageConfig(ctx context.Context, image string, registry *PrivateRegistry) (*ImageConfig, error)
}

// StagingCompletion says how a staging ended: with the image's configuration, or a failure.
type StagingCompletion struct {
	StagingGUID string
	// CallbackURL is the completion_callback CC gave when it asked for the staging.
	CallbackURL string
	// Image is the image as CC gave it.
	Image string
	// Config is the image's configuration; nil when the staging failed.
	Config *ImageConfig
	// FailureReason says, shortly, why the staging failed (CC stores it).
	FailureReason string
	// OwedSince is when the staging was accepted: the delivery bound counts from it.
	OwedSince time.Time
}

// Failed tells whether the staging failed.
func (c StagingCompletion) Failed() bool { return c.Config == nil }
