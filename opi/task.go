package opi

import "context"

// TaskFailureCancelled is the failure reason of a task that was cancelled, in CC's words.
const TaskFailureCancelled = "task was cancelled"

// Task is a one-off process (CC's `cf run-task`): run once to its end, then reported to
// CompletionCallback.
type Task struct {
	GUID             string
	Name             string
	AppGUID          string
	AppName          string
	SpaceGUID        string
	SpaceName        string
	OrganizationGUID string
	OrganizationName string

	// Image is the OCI image to run; Command overrides its entrypoint when not empty.
	Image           string
	Command         []string
	PrivateRegistry *PrivateRegistry
	// Env is the task's environment. Values may carry credentials: a backend keeps them out of
	// logs, labels, annotations and plain workload specs.
	Env map[string]string

	MemoryMB  int64
	DiskMB    int64
	CPUWeight int32

	// CompletionCallback is where the backend's TaskNotifier reports the end of the task.
	CompletionCallback string

	// Read-only facts a backend reports back on reads; ignored on desire.
	State         string
	Failed        bool
	FailureReason string
}

// Task states, as CC names them.
const (
	// TaskRunning: desired and not ended yet (its process may still be starting).
	TaskRunning = "RUNNING"
	// TaskCompleted: ended (succeeded, failed or cancelled); Failed and FailureReason say how.
	TaskCompleted = "COMPLETED"
)

// TaskBackend runs tasks. README.md ("Tasks") spells out each call's guarantees.
//
//counterfeiter:generate -o ../fakes/task_backend.go . TaskBackend
type TaskBackend interface {
	// DesireTask runs the task. Idempotent: desiring a task that exists changes nothing and
	// succeeds.
	DesireTask(ctx context.Context, task *Task) error
	// GetTask returns the task until the backend has cleaned it up after reporting its end;
	// ErrNotFound otherwise.
	GetTask(ctx context.Context, guid string) (*Task, error)
	// ListTasks returns every task whose end has not been reported to CC yet (never nil). The
	// tasks may be shared with other calls: callers must not modify them.
	ListTasks(ctx context.Context) ([]*Task, error)
	// CancelTask stops a task and has its end reported as failed with TaskFailureCancelled;
	// cancelling a cancelled or ended task succeeds and changes nothing; ErrNotFound for an
	// unknown task.
	CancelTask(ctx context.Context, guid string) error
}

// The task reporter of a backend takes its notifier as a TaskNotifier (events.go).
//
//counterfeiter:generate -o ../fakes/task_notifier.go . TaskNotifier
