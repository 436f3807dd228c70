package k8s

import (
	"context"

	"github.com/opi-bridge/opi/opi"
)

// The calls of the opi/ contract that the Backend forwards to a service of its own (the LRP
// verbs are promoted from the embedded lrp service).

// DesireTask runs the task as a Job (package k8s/internal/task).
func (b *Backend) DesireTask(ctx context.Context, t *opi.Task) error {
	return b.tasks.DesireTask(ctx, t)
}

// CancelTask suspends the task's Job (package k8s/internal/task).
func (b *Backend) CancelTask(ctx context.Context, guid string) error {
	return b.tasks.CancelTask(ctx, guid)
}

// GetTask reads the task from the Job cache (package k8s/internal/task).
func (b *Backend) GetTask(ctx context.Context, guid string) (*opi.Task, error) {
	return b.tasks.GetTask(ctx, guid)
}

// ListTasks lists the tasks whose end CC has not been told (package k8s/internal/task).
func (b *Backend) ListTasks(ctx context.Context) ([]*opi.Task, error) {
	return b.tasks.ListTasks(ctx)
}

// TaskListVersion is the Job cache's version (package k8s/internal/task).
func (b *Backend) TaskListVersion(ctx context.Context) (uint64, error) {
	return b.tasks.TaskListVersion(ctx)
}

// ListTasksVersioned is ListTasks and its version (package k8s/internal/task).
func (b *Backend) ListTasksVersioned(ctx context.Context) ([]*opi.Task, uint64, error) {
	return b.tasks.ListTasksVersioned(ctx)
}

// Stage records the staging (package k8s/internal/staging).
func (b *Backend) Stage(ctx context.Context, s *opi.Staging) error {
	return b.staging.Stage(ctx, s)
}

// Sweep is the janitor's sweep (package k8s/internal/janitor), which RunLeaderWork runs every
// Options.Janitor.Period.
func (b *Backend) Sweep(ctx context.Context) {
	b.janitor.Sweep(ctx)
}
