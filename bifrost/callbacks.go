package bifrost

import (
	"context"
	"time"

	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

//go:generate go tool counterfeiter -generate

// CallbackClient delivers one callback to Cloud Controller (see cc.Client.Deliver): nil once it
// is settled, an error only while it is still owed.
//
//counterfeiter:generate -o ../fakes/callback_client.go . CallbackClient
type CallbackClient interface {
	Deliver(ctx context.Context, kind, target string, body any, owedSince time.Time) error
	CrashURL(processGUID string) (string, error)
}

// Callbacks turns a backend's events into Cloud Controller's callback bodies and delivers them.
// It implements opi.TaskNotifier and opi.CrashNotifier.
type Callbacks struct {
	Client CallbackClient
}

var (
	_ opi.TaskNotifier  = (*Callbacks)(nil)
	_ opi.CrashNotifier = (*Callbacks)(nil)
)

// TaskCompleted tells CC, at the task's completion_callback, that the task ended.
func (c *Callbacks) TaskCompleted(ctx context.Context, t opi.TaskCompletion) error {
	body := models.TaskCompletedCallback{TaskGUID: t.TaskGUID, Failed: t.Failed, FailureReason: t.FailureReason}
	return c.Client.Deliver(ctx, "task-completed", t.CallbackURL, body, t.OwedSince)
}

// InstanceCrashed reports a crash at CC's crash endpoint for the LRP. Without a configured CC
// internal URL there is nowhere to send it: the crash is settled (CrashURL's error is returned by
// nothing; the caller logs that crash reports are off at start-up).
func (c *Callbacks) InstanceCrashed(ctx context.Context, crash opi.Crash) error {
	target, err := c.Client.CrashURL(crash.ProcessGUID())
	if err != nil {
		return nil
	}
	body := models.CrashReport{
		Instance:        crash.InstanceGUID,
		Index:           crash.Index,
		Reason:          crash.Reason,
		ExitStatus:      crash.ExitStatus,
		ExitDescription: crash.ExitDescription,
		CrashCount:      crash.CrashCount,
		CrashTimestamp:  crash.CrashTimestamp.Unix(),
	}
	return c.Client.Deliver(ctx, "crash", target, body, crash.OwedSince)
}
