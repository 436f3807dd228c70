package opi

import (
	"context"
	"errors"
)

//go:generate go tool counterfeiter -generate

// Errors a backend returns, wrapped with detail. Callers tell them apart with errors.Is.
var (
	// ErrNotFound: no such LRP (or instance).
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the request cannot be carried out as given (bad value, index out of range).
	ErrInvalid = errors.New("invalid")
	// ErrUnavailable: the orchestrator cannot be reached now; the caller may retry.
	ErrUnavailable = errors.New("orchestrator unavailable")
)

// The backend contract reacts to the lifecycle of an LRP in the domain's terms (desired,
// updated, stopped, one instance stopped) and answers reads. A backend is free to create
// whatever objects serve an event. README.md spells out each call's guarantees.

// LRPDesirer runs a newly desired LRP.
type LRPDesirer interface {
	// DesireLRP is idempotent: desiring an LRP that exists changes nothing and succeeds, and
	// completes whatever an interrupted earlier desire of it left undone.
	DesireLRP(ctx context.Context, lrp *LRP) error
}

// LRPUpdater applies CC's changes to a running LRP.
type LRPUpdater interface {
	// UpdateLRP returns ErrNotFound for an absent LRP.
	UpdateLRP(ctx context.Context, id LRPIdentifier, update LRPUpdate) error
}

// LRPStopper stops LRPs and single instances.
type LRPStopper interface {
	// StopLRP removes the LRP and everything the backend made for it; stopping an absent LRP
	// succeeds.
	StopLRP(ctx context.Context, id LRPIdentifier) error
	// StopInstance stops the instance reported at index; the LRP replaces it. ErrNotFound for
	// an absent LRP, ErrInvalid for an index outside 0..instances-1.
	StopInstance(ctx context.Context, id LRPIdentifier, index int32) error
}

// LRPReader answers reads. After a write of this backend has returned, reads reflect it.
type LRPReader interface {
	// ListLRPs returns every LRP being run (never those being stopped) with its scheduling
	// fields only: identity, AppGUID, Instances, MemoryMB, DiskMB, LastUpdated and
	// ModificationTag, as Diego's scheduling infos. GetLRP returns the rest. The LRPs may be
	// shared with other calls: callers must not modify them.
	ListLRPs(ctx context.Context) ([]*LRP, error)
	// GetLRP returns ErrNotFound for an absent LRP.
	GetLRP(ctx context.Context, id LRPIdentifier) (*LRP, error)
	// GetInstances returns the instances of an LRP ordered by index, at most its desired
	// count; ErrNotFound for an absent LRP.
	GetInstances(ctx context.Context, id LRPIdentifier) ([]*Instance, error)
}

// LRPBackend is a whole backend.
//
//counterfeiter:generate -o ../fakes/lrp_backend.go . LRPBackend
type LRPBackend interface {
	LRPDesirer
	LRPUpdater
	LRPStopper
	LRPReader
}
