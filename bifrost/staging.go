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
	// The guid names the record and labels it: validateGUID applies Kubernetes' label rule too
	// (no '-' at either end).
	if err := validateGUID("staging_guid", stagingGUID); err != nil {
		return nil, err
	}
	if req.StagingGUID != "" && req.StagingGUID != stagingGUID {
		return nil, invalid("staging_guid", "%q does not match the path's %q", req.StagingGUID, stagingGUID)
	}
	docker, registry, err := dockerImage(req.Lifecycle, "stages")
	if err != nil {
		return nil, err
	}
	// The registry client's parser too: it reads the image's config here.
	if _, err := name.ParseReference(docker.Image); err != nil {
		return nil, invalid("lifecycle.docker_lifecycle.image", "%q is not a valid image reference", docker.Image)
	}
	if (docker.RegistryUsername == "") != (docker.RegistryPassword == "") {
		return nil, invalid("lifecycle.docker_lifecycle", "registry_username and registry_password go together")
	}
	if err := checkCallback(req.CompletionCallback, urls); err != nil {
		return nil, err
	}
	if err := checkBounds(
		bound{field: "memory_mb", value: req.MemoryMB, highest: MaxMemoryMB},
		bound{field: "disk_mb", value: req.DiskMB, highest: MaxDiskMB},
		bound{field: "cpu_weight", value: req.CPUWeight, highest: MaxCPUWeight},
		bound{field: "environment", value: int64(len(req.Environment)), highest: MaxEnvEntries, count: true},
	); err != nil {
		return nil, err
	}
	for i, env := range req.Environment {
		// The staging's env reaches no container (only the image's config is read), so the
		// cluster's strictness does not apply: the widest rule Kubernetes has.
		if err := ValidateEnvName(fmt.Sprintf("environment[%d].name", i), env.Name, Rules{}); err != nil {
			return nil, err
		}
	}

	// Credentials come in pairs (checked above), so registry is nil exactly without them.
	return &opi.Staging{
		GUID:            stagingGUID,
		AppGUID:         req.AppGUID,
		AppName:         req.AppName,
		SpaceGUID:       req.SpaceGUID,
		OrgGUID:         req.OrgGUID,
		Image:           docker.Image,
		CallbackURL:     req.CompletionCallback,
		PrivateRegistry: registry,
	}, nil
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
