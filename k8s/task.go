package k8s

import (
	"context"

	"github.com/opi-bridge/opi/k8s/task"
	"github.com/opi-bridge/opi/opi"
)

var _ opi.TaskListVersioner = (*Backend)(nil)

// The task calls are package k8s/task's (b.tasks); the backend forwards them.

// DesireTask runs the task as a Job (task.Service.DesireTask).
func (b *Backend) DesireTask(ctx context.Context, t *opi.Task) error {
	return b.tasks.DesireTask(ctx, t)
}

// CancelTask suspends the task's Job (task.Service.CancelTask).
func (b *Backend) CancelTask(ctx context.Context, guid string) error {
	return b.tasks.CancelTask(ctx, guid)
}

// GetTask reads the task from the Job cache (task.Service.GetTask).
func (b *Backend) GetTask(ctx context.Context, guid string) (*opi.Task, error) {
	return b.tasks.GetTask(ctx, guid)
}

// ListTasks lists the tasks whose end CC has not been told (task.Service.ListTasks).
func (b *Backend) ListTasks(ctx context.Context) ([]*opi.Task, error) {
	return b.tasks.ListTasks(ctx)
}

// TaskListVersion is the Job cache's version (task.Service.TaskListVersion).
func (b *Backend) TaskListVersion(ctx context.Context) (uint64, error) {
	return b.tasks.TaskListVersion(ctx)
}

// ListTasksVersioned is ListTasks and its version (task.Service.ListTasksVersioned).
func (b *Backend) ListTasksVersioned(ctx context.Context) ([]*opi.Task, uint64, error) {
	return b.tasks.ListTasksVersioned(ctx)
}

// newTasks builds the task service, after the hooks (its policies are the network policy
// hook's). Its settings and dependencies are the backend's own, so New cannot refuse them.
func (b *Backend) newTasks(opts Options) *task.Service {
	s, err := task.New(b.namespace, b.logger, b.workload, task.Options{Retention: opts.TaskRetention}, task.Deps{
		Client:   b.client,
		Cache:    b.store,
		Policies: b.policies,
		Notifier: opts.TaskNotifier,
	})
	if err != nil {
		panic(err) // a nil client: no backend works without one
	}
	return s
}
