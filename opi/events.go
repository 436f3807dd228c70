package opi

import (
	"context"
	"time"
)

// Cloud Controller also wants to hear what happens after a request has returned: a task ended,
// an instance of an LRP crashed, a staging finished. A backend notices these events (from the
// orchestrator, never by polling CC) and hands each one to a notifier, which delivers it to CC.
//
// What is still owed to CC is recorded in the orchestrator, never only in memory, so that an
// event survives a restart of the bridge: a backend marks an event delivered only once its
// notifier returned nil, and hands it again after a restart otherwise.

// TaskCompletion says that a task ended (or was cancelled).
type TaskCompletion struct {
	TaskGUID string
	// CallbackURL is the completion_callback CC gave when it desired the task.
	CallbackURL   string
	Failed        bool
	FailureReason string
	// OwedSince is when the task ended: the delivery bound counts from it.
	OwedSince time.Time
}

// Crash says that an instance of an LRP crashed: its app container exited (any exit: an LRP
// should never exit) or restarted after a failure.
type Crash struct {
	LRPIdentifier
	// InstanceGUID names the crashed instance (for Kubernetes, its pod's name).
	InstanceGUID string
	Index        int32
	// Reason is Diego's short reason ("CRASHED"); ExitDescription says more (e.g. the
	// container's termination reason and exit code).
	Reason          string
	ExitStatus      int32
	ExitDescription string
	// CrashCount is how often this instance has crashed so far, this crash included.
	CrashCount     int32
	CrashTimestamp time.Time
	// OwedSince is when the backend noticed the crash: the delivery bound counts from it.
	OwedSince time.Time
}

// A notifier returns nil once an event is settled: CC accepted it, refused it for good (a 4xx
// answer, logged and not retried), or did not accept it within the delivery bound (logged). Any
// error means the event is still owed (the context ended first): the backend keeps its record and
// hands the event again later.

// TaskNotifier delivers task completions.
type TaskNotifier interface {
	TaskCompleted(ctx context.Context, completion TaskCompletion) error
}

// CrashNotifier delivers crash reports.
type CrashNotifier interface {
	InstanceCrashed(ctx context.Context, crash Crash) error
}

// StagingNotifier delivers staging results.
//
//counterfeiter:generate -o ../fakes/staging_notifier.go . StagingNotifier
type StagingNotifier interface {
	StagingCompleted(ctx context.Context, completion StagingCompletion) error
}
