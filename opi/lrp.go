// Package opi holds the orchestrator-neutral model of what Cloud Foundry runs (long-running
// processes and their instances) and the contract a backend implements to run them. It knows
// nothing of HTTP, of Cloud Controller's wire shapes or of Kubernetes: see README.md beside it.
package opi

// LRPIdentifier names one desired LRP: a CC process guid and version. A new version is a new LRP.
type LRPIdentifier struct {
	GUID    string
	Version string
}

// ProcessGUID is Diego's name for the LRP: "<guid>-<version>".
func (id LRPIdentifier) ProcessGUID() string {
	return id.GUID + "-" + id.Version
}

// LRP is a desired long-running process: everything a backend needs to run its instances.
type LRP struct {
	LRPIdentifier

	ProcessType      string
	AppGUID          string
	AppName          string
	SpaceGUID        string
	SpaceName        string
	OrganizationGUID string
	OrganizationName string

	// Image is the OCI image reference to run; Command overrides its entrypoint when not empty.
	Image           string
	Command         []string
	PrivateRegistry *PrivateRegistry

	// Env is the app's environment. Values may carry credentials (VCAP_SERVICES): a backend
	// must keep them out of logs, labels, annotations and plain workload specs.
	Env map[string]string

	Ports       []int32
	Health      HealthCheck
	MemoryMB    int64
	DiskMB      int64
	CPUWeight   int32
	Instances   int32
	Routes      []Route
	LastUpdated string

	// UserDefinedAnnotations are the app's own annotations, passed to its instances.
	UserDefinedAnnotations map[string]string

	// EgressRules are the app's application security groups: where its instances may connect.
	// None means no egress at all (beyond what the platform allows every app).
	EgressRules []EgressRule
	// PlacementTags name the isolation segment the instances must run in (at most one).
	PlacementTags []string
	// VolumeMounts are service volumes mounted into every instance.
	VolumeMounts []VolumeMount

	// Read-only facts a backend reports back on reads; ignored on desire.
	ModificationTag ModificationTag
}

// PrivateRegistry holds the credentials to pull Image. Password is a secret.
type PrivateRegistry struct {
	Server   string
	Username string
	Password string
}

// Health check types, as CC names them.
const (
	HealthCheckPort    = "port"
	HealthCheckHTTP    = "http"
	HealthCheckProcess = "process"
	HealthCheckNone    = "none"
)

// HealthCheck says how a backend tells that an instance is up.
type HealthCheck struct {
	// Type is one of the HealthCheck* constants.
	Type string
	// Endpoint is the HTTP path for an "http" check.
	Endpoint string
	// TimeoutMs bounds one check; StartTimeoutMs bounds how long an instance may take to start.
	TimeoutMs      int64
	StartTimeoutMs int64
}

// Route is a hostname routed to one of the LRP's ports.
type Route struct {
	Hostname string
	Port     int32
}

// Egress rule protocols, as CC names them.
const (
	ProtocolTCP  = "tcp"
	ProtocolUDP  = "udp"
	ProtocolICMP = "icmp"
	ProtocolAll  = "all"
)

// EgressRule allows connections from the app to Destinations. Ports apply to tcp and udp
// only; no ports means every port.
type EgressRule struct {
	// Protocol is one of the Protocol* constants.
	Protocol string
	// Destinations are CIDRs (a single address is a /32 or /128; CC's "a-b" ranges arrive
	// already split into the CIDRs that cover them exactly).
	Destinations []string
	Ports        []PortRange
	// ICMPType and ICMPCode narrow an icmp rule (-1: any).
	ICMPType int32
	ICMPCode int32
}

// PortRange is Start..End, both included; a single port has Start == End.
type PortRange struct {
	Start int32
	End   int32
}

// VolumeMount mounts the volume VolumeID at MountDir (an absolute path) in every instance.
type VolumeMount struct {
	VolumeID string
	MountDir string
}

// ModificationTag changes whenever the backend's record of an LRP changes.
type ModificationTag struct {
	Epoch string
	Index int64
}

// LRPUpdate is what Cloud Controller may change on a running LRP. A nil field is left alone.
// Everything else (env, memory, ports, health checks) comes with a new version.
type LRPUpdate struct {
	Instances  *int32
	Routes     *[]Route
	Annotation *string
	Image      *string
}

// Instance states, as Diego reports them and CC understands them.
const (
	// InstanceRunning: started and passing its health check.
	InstanceRunning = "RUNNING"
	// InstanceClaimed: placed and starting.
	InstanceClaimed = "CLAIMED"
	// InstanceUnclaimed: not placed; PlacementError says why when the orchestrator said.
	InstanceUnclaimed = "UNCLAIMED"
	// InstanceCrashed: its process exited or keeps failing.
	InstanceCrashed = "CRASHED"
)

// Instance is one running copy of an LRP.
type Instance struct {
	Index int32
	State string
	// Since is when the instance entered State, in Unix nanoseconds.
	Since          int64
	PlacementError string
	// CrashReason says why a CRASHED instance crashed (Diego's crash_reason), "" otherwise.
	CrashReason string
}
