package models

// The bodies opi POSTs to Cloud Controller's internal API.

// TaskCompletedCallback is POSTed to a task's completion_callback when it ends or is cancelled.
type TaskCompletedCallback struct {
	TaskGUID      string `json:"task_guid"`
	Failed        bool   `json:"failed"`
	FailureReason string `json:"failure_reason"`
}

// CrashReport is POSTed to <cc internal url>/internal/v4/apps/{process_guid}/crashed.
type CrashReport struct {
	// Instance is the crashed instance's guid (its pod's name).
	Instance        string `json:"instance"`
	Index           int32  `json:"index"`
	Reason          string `json:"reason"`
	ExitStatus      int32  `json:"exit_status"`
	ExitDescription string `json:"exit_description"`
	CrashCount      int32  `json:"crash_count"`
	// CrashTimestamp is in Unix seconds.
	CrashTimestamp int64 `json:"crash_timestamp"`
}
