// Package bifrost converts Cloud Controller's process requests into orchestrator-neutral LRPs
// for a backend, and the backend's answers back into the Diego shapes CC reads.
package bifrost

import (
	"context"
	"errors"
	"fmt"

	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

// LRP is the bifrost for long-running processes.
type LRP struct {
	Backend opi.LRPBackend
	// Rules are the cluster's Kubernetes rules that requests are checked against.
	Rules Rules
}

// Desire validates the request whole, converts it, then hands the LRP to the backend; a refused
// request (an opi.ErrInvalid naming the field) reaches no backend.
func (b *LRP) Desire(ctx context.Context, req models.DesireLRPRequest) error {
	parts, err := validateDesire(req, b.Rules)
	if err != nil {
		return err
	}
	if err := b.Backend.DesireLRP(ctx, convertDesire(req, parts)); err != nil {
		return fmt.Errorf("desire lrp: %w", err)
	}
	return nil
}

// List returns the scheduling infos of every running LRP, never nil.
func (b *LRP) List(ctx context.Context) ([]models.DesiredLRPSchedulingInfo, error) {
	lrps, err := b.Backend.ListLRPs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list lrps: %w", err)
	}
	return schedulingInfos(lrps), nil
}

func schedulingInfos(lrps []*opi.LRP) []models.DesiredLRPSchedulingInfo {
	infos := make([]models.DesiredLRPSchedulingInfo, 0, len(lrps))
	for _, lrp := range lrps {
		infos = append(infos, SchedulingInfo(lrp))
	}
	return infos
}

// ListVersion is the version of the list List would return now, when the backend keeps one
// (opi.LRPListVersioner); ok is false when it does not.
func (b *LRP) ListVersion(ctx context.Context) (version uint64, ok bool, err error) {
	versioner, ok := b.Backend.(opi.LRPListVersioner)
	if !ok {
		return 0, false, nil
	}
	version, err = versioner.LRPListVersion(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("list lrps: %w", err)
	}
	return version, true, nil
}

// ListVersioned is List and the version of exactly that list; only for a backend whose
// ListVersion is ok.
func (b *LRP) ListVersioned(ctx context.Context) ([]models.DesiredLRPSchedulingInfo, uint64, error) {
	versioner, ok := b.Backend.(opi.LRPListVersioner)
	if !ok {
		return nil, 0, errNoListVersion
	}
	lrps, version, err := versioner.ListLRPsVersioned(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list lrps: %w", err)
	}
	return schedulingInfos(lrps), version, nil
}

// errNoListVersion is a versioned list asked of a backend that keeps no list version.
var errNoListVersion = errors.New("the backend keeps no list version")

// Get returns one LRP; opi.ErrNotFound when absent.
func (b *LRP) Get(ctx context.Context, id opi.LRPIdentifier) (*models.DesiredLRP, error) {
	if err := ValidateIdentifier(id); err != nil {
		return nil, err
	}
	lrp, err := b.Backend.GetLRP(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get lrp: %w", err)
	}
	desired := DesiredLRP(lrp)
	return &desired, nil
}

// Update validates the update and applies it.
func (b *LRP) Update(ctx context.Context, req models.UpdateDesiredLRPRequest) error {
	id, update, err := ConvertUpdate(req)
	if err != nil {
		return err
	}
	if err := b.Backend.UpdateLRP(ctx, id, update); err != nil {
		return fmt.Errorf("update lrp: %w", err)
	}
	return nil
}

// Stop stops an LRP; stopping an absent one succeeds.
func (b *LRP) Stop(ctx context.Context, id opi.LRPIdentifier) error {
	if err := ValidateIdentifier(id); err != nil {
		return err
	}
	if err := b.Backend.StopLRP(ctx, id); err != nil {
		return fmt.Errorf("stop lrp: %w", err)
	}
	return nil
}

// StopInstance stops the instance at index so that it is replaced.
func (b *LRP) StopInstance(ctx context.Context, id opi.LRPIdentifier, index int32) error {
	if err := ValidateIdentifier(id); err != nil {
		return err
	}
	if index < 0 {
		return invalid("index", "must not be negative, got %d", index)
	}
	if err := b.Backend.StopInstance(ctx, id, index); err != nil {
		return fmt.Errorf("stop instance %d: %w", index, err)
	}
	return nil
}

// Instances returns the instances of an LRP by index, never nil.
func (b *LRP) Instances(ctx context.Context, id opi.LRPIdentifier) ([]models.Instance, error) {
	if err := ValidateIdentifier(id); err != nil {
		return nil, err
	}
	instances, err := b.Backend.GetInstances(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get instances: %w", err)
	}
	out := make([]models.Instance, 0, len(instances))
	for _, in := range instances {
		out = append(out, Instance(in))
	}
	return out, nil
}
