package models

// TaskRequest is the body of POST /tasks/{task_guid}; the guid is only in the path. Keys CC
// sends that opi has no use for are ignored, never rejected.
type TaskRequest struct {
	Name        string                `json:"name"`
	AppGUID     string                `json:"app_guid"`
	AppName     string                `json:"app_name"`
	OrgGUID     string                `json:"org_guid"`
	OrgName     string                `json:"org_name"`
	SpaceGUID   string                `json:"space_guid"`
	SpaceName   string                `json:"space_name"`
	Environment []EnvironmentVariable `json:"environment"`
	// CompletionCallback is where opi POSTs a TaskCompletedCallback when the task ends.
	CompletionCallback string    `json:"completion_callback"`
	Lifecycle          Lifecycle `json:"lifecycle"`
	// MemoryMB, DiskMB and CPUWeight are optional: CC's current shape sends none of them (the
	// memory limit comes in MEMORY_LIMIT).
	MemoryMB  int64 `json:"memory_mb"`
	DiskMB    int64 `json:"disk_mb"`
	CPUWeight int64 `json:"cpu_weight"`
}

// Task states, as CC reads them.
const (
	TaskRunning   = "RUNNING"
	TaskCompleted = "COMPLETED"
)

// TaskResponse is one task as GET /tasks/{task_guid} and GET /tasks report it.
type TaskResponse struct {
	GUID          string `json:"guid"`
	Name          string `json:"name"`
	AppGUID       string `json:"app_guid"`
	AppName       string `json:"app_name,omitempty"`
	SpaceGUID     string `json:"space_guid,omitempty"`
	OrgGUID       string `json:"org_guid,omitempty"`
	State         string `json:"state"`
	Failed        bool   `json:"failed"`
	FailureReason string `json:"failure_reason"`
}
