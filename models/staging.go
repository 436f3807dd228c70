package models

// StagingRequest is the body of POST /stage/{staging_guid}: Cloud Controller asks the bridge to
// stage an app. opi stages docker images only (lifecycle.docker_lifecycle).
type StagingRequest struct {
	AppGUID     string `json:"app_guid"`
	AppName     string `json:"app_name"`
	StagingGUID string `json:"staging_guid"`
	OrgGUID     string `json:"org_guid"`
	OrgName     string `json:"org_name"`
	SpaceGUID   string `json:"space_guid"`
	SpaceName   string `json:"space_name"`
	// Environment is a list of name/value pairs (unlike an LRP's object).
	Environment []EnvironmentVariable `json:"environment"`
	// CompletionCallback is where the result is POSTed (CC's internal API).
	CompletionCallback string `json:"completion_callback"`
	// Lifecycle's docker_lifecycle carries the image and its registry credentials; its command
	// is not used in staging.
	Lifecycle Lifecycle `json:"lifecycle"`
	MemoryMB  int64     `json:"memory_mb"`
	DiskMB    int64     `json:"disk_mb"`
	CPUWeight int64     `json:"cpu_weight"`
}

// EnvironmentVariable is one entry of a task's or staging's environment list.
type EnvironmentVariable struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// MessageResponse is the error body of the task and staging routes: {"message":"..."}.
type MessageResponse struct {
	Message string `json:"message"`
}

// StagingCompletedCallback is POSTed to a staging's completion_callback: exactly one of Result
// (the image could be read) and Error (it could not).
type StagingCompletedCallback struct {
	Result *StagingResult `json:"result,omitempty"`
	Error  *StagingError  `json:"error,omitempty"`
}

// StagingResult is a successful docker staging, as Diego's docker stager reports it.
type StagingResult struct {
	// LifecycleType is "docker".
	LifecycleType     string                   `json:"lifecycle_type"`
	LifecycleMetadata StagingLifecycleMetadata `json:"lifecycle_metadata"`
	// ProcessTypes is {"web": ""}: a docker app's start command comes from its image.
	ProcessTypes map[string]string `json:"process_types"`
	// ExecutionMetadata is ExecutionMetadata encoded as a JSON string (CC stores it as is).
	ExecutionMetadata string `json:"execution_metadata"`
}

// StagingLifecycleMetadata names the staged image.
type StagingLifecycleMetadata struct {
	// DockerImage is the image as CC gave it.
	DockerImage string `json:"docker_image"`
}

// StagingError is a failed staging. ID is "StagingError"; Message is short (CC stores it).
type StagingError struct {
	ID      string `json:"id"`
	Message string `json:"message"`
}

// ExecutionMetadata is what Diego's docker stager reads from an image's configuration: CC shows
// the command from cmd and entrypoint and takes the app's default ports from ports.
type ExecutionMetadata struct {
	Cmd        []string        `json:"cmd,omitempty"`
	Entrypoint []string        `json:"entrypoint,omitempty"`
	Workdir    string          `json:"workdir,omitempty"`
	User       string          `json:"user,omitempty"`
	Ports      []ExecutionPort `json:"ports,omitempty"`
}

// ExecutionPort is one exposed port of the image. The capitalised keys are Diego's.
type ExecutionPort struct {
	Port     int32  `json:"Port"`
	Protocol string `json:"Protocol"`
}
