package bifrost

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

// TaskDefaults are the resources of a task whose request names none: CC's current TaskRequest
// carries no memory, disk or cpu (memory only as MEMORY_LIMIT in the environment).
type TaskDefaults struct {
	MemoryMB  int64
	DiskMB    int64
	CPUWeight int32
}

// DefaultTaskDefaults are used when the operator configures none.
var DefaultTaskDefaults = TaskDefaults{MemoryMB: 1024, DiskMB: 1024, CPUWeight: 10}

// memoryLimitEnv is the variable CC puts a task's memory limit in ("256m", "1g").
const memoryLimitEnv = "MEMORY_LIMIT"

// Task is the bifrost for one-off tasks.
type Task struct {
	Backend  opi.TaskBackend
	URLs     URLChecker
	Defaults TaskDefaults
	// Rules are the cluster's rules for env names (see Rules).
	Rules Rules
}

// Desire validates and converts the request, then hands the task to the backend.
func (t *Task) Desire(ctx context.Context, guid string, req models.TaskRequest) error {
	task, err := t.ConvertTask(guid, req)
	if err != nil {
		return err
	}
	if err := t.Backend.DesireTask(ctx, task); err != nil {
		return fmt.Errorf("desire task: %w", err)
	}
	return nil
}

// Get returns one task; opi.ErrNotFound when unknown.
func (t *Task) Get(ctx context.Context, guid string) (*models.TaskResponse, error) {
	if err := validateGUID("task_guid", guid); err != nil {
		return nil, err
	}
	task, err := t.Backend.GetTask(ctx, guid)
	if err != nil {
		return nil, fmt.Errorf("get task: %w", err)
	}
	resp := TaskResponse(task)
	return &resp, nil
}

// List returns every task CC has not been told the end of, never nil.
func (t *Task) List(ctx context.Context) ([]models.TaskResponse, error) {
	tasks, err := t.Backend.ListTasks(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return taskResponses(tasks), nil
}

// ListVersion is the version of the list List would return now, when the backend keeps one
// (opi.TaskListVersioner); ok is false when it does not.
func (t *Task) ListVersion(ctx context.Context) (version uint64, ok bool, err error) {
	versioner, ok := t.Backend.(opi.TaskListVersioner)
	if !ok {
		return 0, false, nil
	}
	version, err = versioner.TaskListVersion(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("list tasks: %w", err)
	}
	return version, true, nil
}

// ListVersioned is List and the version of exactly that list; only for a backend whose
// ListVersion is ok.
func (t *Task) ListVersioned(ctx context.Context) ([]models.TaskResponse, uint64, error) {
	versioner, ok := t.Backend.(opi.TaskListVersioner)
	if !ok {
		return nil, 0, errNoListVersion
	}
	tasks, version, err := versioner.ListTasksVersioned(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list tasks: %w", err)
	}
	return taskResponses(tasks), version, nil
}

func taskResponses(tasks []*opi.Task) []models.TaskResponse {
	out := make([]models.TaskResponse, 0, len(tasks))
	for _, task := range tasks {
		out = append(out, TaskResponse(task))
	}
	return out
}

// Cancel cancels a task; opi.ErrNotFound when unknown.
func (t *Task) Cancel(ctx context.Context, guid string) error {
	if err := validateGUID("task_guid", guid); err != nil {
		return err
	}
	if err := t.Backend.CancelTask(ctx, guid); err != nil {
		return fmt.Errorf("cancel task: %w", err)
	}
	return nil
}

// ConvertTask validates a TaskRequest and turns it into an opi.Task. Every check happens here,
// so that a rejected request never reaches the backend.
func (t *Task) ConvertTask(guid string, req models.TaskRequest) (*opi.Task, error) {
	if err := validateGUID("task_guid", guid); err != nil {
		return nil, err
	}
	if err := checkCallback(req.CompletionCallback, t.URLs); err != nil {
		return nil, err
	}
	docker, registry, err := dockerImage(req.Lifecycle, "runs")
	if err != nil {
		return nil, err
	}

	if err := checkBounds(bound{field: "environment", value: int64(len(req.Environment)), highest: MaxEnvEntries, count: true}); err != nil {
		return nil, err
	}
	env := make(map[string]string, len(req.Environment))
	for i, v := range req.Environment {
		if err := ValidateEnvName(fmt.Sprintf("environment[%d].name", i), v.Name, t.Rules); err != nil {
			return nil, err
		}
		env[v.Name] = v.Value // a later entry of the same name wins, as in a shell
	}
	if err := ValidateEnv("environment", env, t.Rules); err != nil {
		return nil, err
	}

	if err := checkBounds(
		bound{field: "memory_mb", value: req.MemoryMB, highest: MaxMemoryMB},
		bound{field: "disk_mb", value: req.DiskMB, highest: MaxDiskMB},
		bound{field: "cpu_weight", value: req.CPUWeight, highest: MaxCPUWeight},
	); err != nil {
		return nil, err
	}
	memoryMB := req.MemoryMB
	if limit, ok := env[memoryLimitEnv]; ok && memoryMB == 0 {
		mb, err := ParseMemoryLimit(limit)
		if err != nil {
			return nil, invalid("environment."+memoryLimitEnv, "%s", err.Error())
		}
		memoryMB = mb
	}
	if memoryMB == 0 {
		memoryMB = t.Defaults.MemoryMB
	}
	diskMB := req.DiskMB
	if diskMB == 0 {
		diskMB = t.Defaults.DiskMB
	}
	cpuWeight := int32(req.CPUWeight)
	if cpuWeight == 0 {
		cpuWeight = t.Defaults.CPUWeight
	}

	return &opi.Task{
		GUID:               guid,
		Name:               req.Name,
		AppGUID:            req.AppGUID,
		AppName:            req.AppName,
		SpaceGUID:          req.SpaceGUID,
		SpaceName:          req.SpaceName,
		OrganizationGUID:   req.OrgGUID,
		OrganizationName:   req.OrgName,
		Image:              docker.Image,
		Command:            docker.Command,
		Env:                env,
		MemoryMB:           memoryMB,
		DiskMB:             diskMB,
		CPUWeight:          cpuWeight,
		CompletionCallback: req.CompletionCallback,
		PrivateRegistry:    registry,
	}, nil
}

var memoryLimitPattern = regexp.MustCompile(`^([0-9]+)\s*([kKmMgGtT]?)[bB]?$`)

// ParseMemoryLimit reads CC's MEMORY_LIMIT ("256m", "1g", "512M", "1024") into MiB: k, m, g and
// t are binary units, a bare number is MiB. Below 1 MiB rounds up to 1.
func ParseMemoryLimit(s string) (int64, error) {
	m := memoryLimitPattern.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("%q is not a memory size like 256m or 1g", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is too large", s)
	}
	var mb int64
	switch strings.ToLower(m[2]) {
	case "k":
		mb = (n + 1023) / 1024
	case "", "m":
		mb = n
	case "g":
		mb = n * 1024
	case "t":
		mb = n * 1024 * 1024
	}
	if mb < 1 || mb > MaxMemoryMB || n > MaxMemoryMB*1024 {
		return 0, fmt.Errorf("%q is outside 1m..%dm", s, MaxMemoryMB)
	}
	return mb, nil
}

// TaskResponse is what CC reads of a task.
func TaskResponse(t *opi.Task) models.TaskResponse {
	return models.TaskResponse{
		GUID:          t.GUID,
		Name:          t.Name,
		AppGUID:       t.AppGUID,
		AppName:       t.AppName,
		SpaceGUID:     t.SpaceGUID,
		OrgGUID:       t.OrganizationGUID,
		State:         t.State,
		Failed:        t.Failed,
		FailureReason: t.FailureReason,
	}
}
