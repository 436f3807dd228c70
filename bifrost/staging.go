package bifrost

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

// URLChecker tells whether a callback URL can be used (cc.Client.CheckURL).
//
//counterfeiter:generate -o ../fakes/url_checker.go . URLChecker
type URLChecker interface {
	CheckURL(url string) error
}

// Staging is the bifrost for docker staging.
type Staging struct {
	Stager opi.Stager
	URLs   URLChecker
}

// Stage validates and converts the request, then hands the staging to the stager, which records
// it before this returns.
func (s *Staging) Stage(ctx context.Context, stagingGUID string, req models.StagingRequest) error {
	staging, err := ConvertStaging(stagingGUID, req, s.URLs)
	if err != nil {
		return err
	}
	if err := s.Stager.Stage(ctx, staging); err != nil {
		return fmt.Errorf("stage: %w", err)
	}
	return nil
}

// ConvertStaging validates a StagingRequest for the path's staging guid and turns it into an
// opi.Staging. Every check happens here, so that a rejected request writes nothing.
func ConvertStaging(stagingGUID string, req models.StagingRequest, urls URLChecker) (*opi.Staging, error) {
	if err := validateGUID("staging_guid", stagingGUID); err != nil {
		return nil, err
	}
	// The guid names the record and labels it: Kubernetes' label rule (no '-' at either end).
	if err := ValidateLabelValue("staging_guid", stagingGUID); err != nil {
		return nil, err
	}
	if req.StagingGUID != "" && req.StagingGUID != stagingGUID {
		return nil, invalid("staging_guid", "%q does not match the path's %q", req.StagingGUID, stagingGUID)
	}
	docker := req.Lifecycle.DockerLifecycle
	if docker == nil {
		if len(req.Lifecycle.BuildpackLifecycle) > 0 && string(req.Lifecycle.BuildpackLifecycle) != "null" {
			return nil, invalid("lifecycle", "buildpack_lifecycle is not supported: opi stages docker images only (docker_lifecycle)")
		}
		return nil, invalid("lifecycle.docker_lifecycle", "is required")
	}
	if err := checkImageReference("lifecycle.docker_lifecycle.image", docker.Image); err != nil {
		return nil, err
	}
	if (docker.RegistryUsername == "") != (docker.RegistryPassword == "") {
		return nil, invalid("lifecycle.docker_lifecycle", "registry_username and registry_password go together")
	}
	if req.CompletionCallback == "" {
		return nil, invalid("completion_callback", "is required")
	}
	if err := urls.CheckURL(req.CompletionCallback); err != nil {
		return nil, invalid("completion_callback", "cannot be used: %v", err)
	}
	if err := checkRange("memory_mb", req.MemoryMB, 0, MaxMemoryMB); err != nil {
		return nil, err
	}
	if err := checkRange("disk_mb", req.DiskMB, 0, MaxDiskMB); err != nil {
		return nil, err
	}
	if err := checkRange("cpu_weight", req.CPUWeight, 0, MaxCPUWeight); err != nil {
		return nil, err
	}
	for i, env := range req.Environment {
		// The staging's env reaches no container (only the image's config is read), so the
		// cluster's strictness does not apply: the widest rule Kubernetes has.
		if err := ValidateEnvName(fmt.Sprintf("environment[%d].name", i), env.Name, Rules{}); err != nil {
			return nil, err
		}
	}

	staging := &opi.Staging{
		GUID:        stagingGUID,
		AppGUID:     req.AppGUID,
		AppName:     req.AppName,
		SpaceGUID:   req.SpaceGUID,
		OrgGUID:     req.OrgGUID,
		Image:       docker.Image,
		CallbackURL: req.CompletionCallback,
	}
	if docker.RegistryUsername != "" {
		staging.PrivateRegistry = &opi.PrivateRegistry{
			Server:   RegistryServer(docker.Image),
			Username: docker.RegistryUsername,
			Password: docker.RegistryPassword,
		}
	}
	return staging, nil
}

// checkImageReference checks that image is an image reference a registry client can read
// (registry, repository, tag or digest; the registry and tag may be implied).
func checkImageReference(field, image string) error {
	// The kubelet's parser first: the staged image is what CC will desire and Kubernetes pull.
	if err := ValidateImage(field, image); err != nil {
		return err
	}
	// Then the registry client's, which reads the image's config here.
	if _, err := name.ParseReference(image); err != nil {
		return invalid(field, "%q is not a valid image reference", image)
	}
	return nil
}

// dockerLifecycle and webProcess are what a docker staging result always says.
const (
	dockerLifecycle = "docker"
	webProcess      = "web"
	stagingErrorID  = "StagingError"
)

// StagingCallback is the body CC's completion_callback expects for a staging: the image's
// execution metadata, or a StagingError with the failure's reason.
func StagingCallback(c opi.StagingCompletion) models.StagingCompletedCallback {
	if c.Failed() {
		return models.StagingCompletedCallback{Error: &models.StagingError{ID: stagingErrorID, Message: c.FailureReason}}
	}
	return models.StagingCompletedCallback{Result: &models.StagingResult{
		LifecycleType:     dockerLifecycle,
		LifecycleMetadata: models.StagingLifecycleMetadata{DockerImage: c.Image},
		ProcessTypes:      map[string]string{webProcess: ""},
		ExecutionMetadata: ExecutionMetadata(c.Config),
	}}
}

// ExecutionMetadata is the image configuration as the JSON string Diego's docker stager makes:
// {"cmd","entrypoint","workdir","user","ports":[{"Port","Protocol"}]}, empty fields left out.
func ExecutionMetadata(cfg *opi.ImageConfig) string {
	meta := models.ExecutionMetadata{
		Cmd:        cfg.Cmd,
		Entrypoint: cfg.Entrypoint,
		Workdir:    cfg.WorkingDir,
		User:       cfg.User,
	}
	for _, p := range cfg.Ports {
		meta.Ports = append(meta.Ports, models.ExecutionPort{Port: p.Port, Protocol: p.Protocol})
	}
	encoded, _ := json.Marshal(meta) // strings and ints always marshal
	return string(encoded)
}

var _ opi.StagingNotifier = (*Callbacks)(nil)

// StagingCompleted tells CC, at the staging's completion_callback, what the staged image runs,
// or why it could not be read. Callbacks implements opi.StagingNotifier with it.
func (c *Callbacks) StagingCompleted(ctx context.Context, s opi.StagingCompletion) error {
	return c.Client.Deliver(ctx, "staging-completed", s.CallbackURL, StagingCallback(s), s.OwedSince)
}
