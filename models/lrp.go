// Package models holds the wire types of the OPI contract: the requests Cloud Controller sends
// and the Diego-shaped responses it reads back. It holds no behaviour.
package models

import "encoding/json"

// DesireLRPRequest is the body of PUT /apps/{process_guid}. Keys CC sends that opi has no use
// for (the old namespace key) are ignored, never rejected; egress rules are decoded loosely
// (CC has sent snake_case and camelCase keys) and read by bifrost.
type DesireLRPRequest struct {
	GUID                    string            `json:"guid"`
	Version                 string            `json:"version"`
	ProcessGUID             string            `json:"process_guid"`
	ProcessType             string            `json:"process_type"`
	AppGUID                 string            `json:"app_guid"`
	AppName                 string            `json:"app_name"`
	SpaceGUID               string            `json:"space_guid"`
	SpaceName               string            `json:"space_name"`
	OrganizationGUID        string            `json:"organization_guid"`
	OrganizationName        string            `json:"organization_name"`
	Environment             map[string]string `json:"environment"`
	EgressRules             []json.RawMessage `json:"egress_rules"`
	PlacementTags           []string          `json:"placement_tags"`
	Instances               int               `json:"instances"`
	MemoryMB                int64             `json:"memory_mb"`
	DiskMB                  int64             `json:"disk_mb"`
	CPUWeight               int64             `json:"cpu_weight"`
	HealthCheckType         string            `json:"health_check_type"`
	HealthCheckHTTPEndpoint *string           `json:"health_check_http_endpoint"`
	HealthCheckTimeoutMs    int64             `json:"health_check_timeout_ms"`
	StartTimeoutMs          int64             `json:"start_timeout_ms"`
	LastUpdated             string            `json:"last_updated"`
	VolumeMounts            []VolumeMount     `json:"volume_mounts"`
	Ports                   []int64           `json:"ports"`
	Routes                  Routes            `json:"routes"`
	Lifecycle               Lifecycle         `json:"lifecycle"`
	UserDefinedAnnotations  map[string]string `json:"user_defined_annotations"`
}

// VolumeMount is a service volume CC asks to mount.
type VolumeMount struct {
	VolumeID string `json:"volume_id"`
	MountDir string `json:"mount_dir"`
}

// Routes maps a router name ("cf-router", "tcp-router", ...) to its raw routing info. Only
// cf-router is read; the others are kept raw so that any shape of theirs is accepted.
type Routes map[string]json.RawMessage

// CFRouterKey is the router whose routes opi keeps.
const CFRouterKey = "cf-router"

// CFRoute is one entry of the cf-router list. CC sends "hostname"; Diego's own form is
// "hostnames".
type CFRoute struct {
	Hostname  string   `json:"hostname,omitempty"`
	Hostnames []string `json:"hostnames,omitempty"`
	Port      int64    `json:"port"`
}

// Lifecycle says how to get the app's bits. Only docker_lifecycle can run on opi.
type Lifecycle struct {
	DockerLifecycle    *DockerLifecycle `json:"docker_lifecycle,omitempty"`
	BuildpackLifecycle json.RawMessage  `json:"buildpack_lifecycle,omitempty"`
}

// DockerLifecycle is an image to run, with an optional command and registry credentials.
type DockerLifecycle struct {
	Image            string   `json:"image"`
	Command          []string `json:"command"`
	RegistryUsername string   `json:"registry_username,omitempty"`
	RegistryPassword string   `json:"registry_password,omitempty"`
}

// UpdateDesiredLRPRequest is the body of POST /apps/{process_guid}.
type UpdateDesiredLRPRequest struct {
	GUID    string     `json:"guid"`
	Version string     `json:"version"`
	Update  *LRPUpdate `json:"update"`
}

// LRPUpdate carries the optional changes of an update.
type LRPUpdate struct {
	Instances  *int    `json:"instances,omitempty"`
	Routes     Routes  `json:"routes,omitempty"`
	Annotation *string `json:"annotation,omitempty"`
	Image      *string `json:"image,omitempty"`
}

// DesiredLRPKey identifies an LRP in Diego's terms.
type DesiredLRPKey struct {
	ProcessGUID string `json:"process_guid"`
	Domain      string `json:"domain"`
	LogGUID     string `json:"log_guid"`
}

// DesiredLRPResource is the resource part of a scheduling info.
type DesiredLRPResource struct {
	MemoryMB int64 `json:"memory_mb"`
	DiskMB   int64 `json:"disk_mb"`
}

// ModificationTag changes whenever the LRP's record changes.
type ModificationTag struct {
	Epoch string `json:"epoch"`
	Index int64  `json:"index"`
}

// DesiredLRPSchedulingInfo is one entry of GET /apps, with protobuf field names as CC expects.
type DesiredLRPSchedulingInfo struct {
	DesiredLRPKey      DesiredLRPKey      `json:"desired_lrp_key"`
	Annotation         string             `json:"annotation"`
	Instances          int32              `json:"instances"`
	DesiredLRPResource DesiredLRPResource `json:"desired_lrp_resource"`
	ModificationTag    ModificationTag    `json:"modification_tag"`
	GUID               string             `json:"guid"`
	Version            string             `json:"version"`
}

// SchedulingInfosKey is the key of DesiredLRPSchedulingInfosResponse's list.
const SchedulingInfosKey = "desired_lrp_scheduling_infos"

// DesiredLRPSchedulingInfosResponse is the body of GET /apps. The list is never null.
type DesiredLRPSchedulingInfosResponse struct {
	DesiredLRPSchedulingInfos []DesiredLRPSchedulingInfo `json:"desired_lrp_scheduling_infos"`
}

// DesiredLRP is what GET /apps/{guid}/{version} reports of one LRP.
type DesiredLRP struct {
	ProcessGUID            string             `json:"process_guid"`
	GUID                   string             `json:"guid"`
	Version                string             `json:"version"`
	Domain                 string             `json:"domain"`
	LogGUID                string             `json:"log_guid"`
	ProcessType            string             `json:"process_type,omitempty"`
	AppGUID                string             `json:"app_guid,omitempty"`
	AppName                string             `json:"app_name,omitempty"`
	SpaceGUID              string             `json:"space_guid,omitempty"`
	SpaceName              string             `json:"space_name,omitempty"`
	OrganizationGUID       string             `json:"organization_guid,omitempty"`
	OrganizationName       string             `json:"organization_name,omitempty"`
	Instances              int32              `json:"instances"`
	Annotation             string             `json:"annotation"`
	Image                  string             `json:"image"`
	Command                []string           `json:"command,omitempty"`
	Ports                  []int32            `json:"ports"`
	MemoryMB               int64              `json:"memory_mb"`
	DiskMB                 int64              `json:"disk_mb"`
	CPUWeight              int32              `json:"cpu_weight"`
	HealthCheckType        string             `json:"health_check_type,omitempty"`
	Routes                 map[string][]Route `json:"routes"`
	UserDefinedAnnotations map[string]string  `json:"user_defined_annotations,omitempty"`
	ModificationTag        ModificationTag    `json:"modification_tag"`
}

// Route is a cf-router route as opi reports it.
type Route struct {
	Hostname string `json:"hostname"`
	Port     int32  `json:"port"`
}

// DesiredLRPResponse is the body of GET /apps/{guid}/{version}.
type DesiredLRPResponse struct {
	DesiredLRP DesiredLRP `json:"desired_lrp"`
}

// Instance states are the opi.Instance* constants.

// Instance is one entry of GET /apps/{guid}/{version}/instances.
type Instance struct {
	Index          int32  `json:"index"`
	State          string `json:"state"`
	Since          int64  `json:"since"`
	PlacementError string `json:"placement_error,omitempty"`
	// CrashReason is Diego's crash_reason of a CRASHED instance (also in PlacementError, which
	// CC shows as the instance's details).
	CrashReason string `json:"crash_reason,omitempty"`
}

// InstancesResponse is the body of GET /apps/{guid}/{version}/instances. Error is absent on
// success: CC raises whenever the key is present and truthy, and "" is truthy to CC.
type InstancesResponse struct {
	ProcessGUID string     `json:"process_guid"`
	Instances   []Instance `json:"instances"`
	Error       string     `json:"error,omitempty"`
}

// ErrorResponse is the error body of the LRP routes: {"error":{"message":"..."}}.
type ErrorResponse struct {
	Error Error `json:"error"`
}

// Error is the message of an ErrorResponse.
type Error struct {
	Message string `json:"message"`
}
