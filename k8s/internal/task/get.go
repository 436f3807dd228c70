package task

import (
	"context"
	"fmt"
	"sort"

	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// GetTask reads the task from the Job cache (no API call), until its Job is deleted (a
// retention after CC accepted its end). ErrNotFound otherwise.
func (s *Service) GetTask(_ context.Context, guid string) (*opi.Task, error) {
	if err := s.cache.CheckSynced(); err != nil {
		return nil, err
	}
	j, ok := s.cache.Job(names.TaskJobName(guid))
	if !ok || j.TaskGUID != guid {
		return nil, taskNotFound(guid)
	}
	return j.Task(), nil
}

// ListTasks returns, from the Job cache (no API call), every task CC has not been told the end
// of, ordered by guid: CC's task sync fails a task it holds as running that is neither listed
// nor found, so a task stays listed until its end was reported.
func (s *Service) ListTasks(ctx context.Context) ([]*opi.Task, error) {
	tasks, _, err := s.ListTasksVersioned(ctx)
	return tasks, err
}

// TaskListVersion is the number of changes the Job cache has seen (the store's change counter).
func (s *Service) TaskListVersion(_ context.Context) (uint64, error) {
	if err := s.cache.CheckSynced(); err != nil {
		return 0, err
	}
	return s.cache.JobChanges(), nil
}

// ListTasksVersioned is ListTasks and the Job cache's version, read before the list (the
// backend's ListLRPsVersioned is built the same way, on every call).
func (s *Service) ListTasksVersioned(_ context.Context) ([]*opi.Task, uint64, error) {
	if err := s.cache.CheckSynced(); err != nil {
		return nil, 0, err
	}
	version := s.cache.JobChanges()
	jobs := s.cache.Jobs()
	tasks := make([]*opi.Task, 0, len(jobs))
	for _, j := range jobs {
		if j.Reported == "" && j.DeletionTimestamp == nil && j.TaskGUID != "" {
			tasks = append(tasks, j.Task())
		}
	}
	sort.Slice(tasks, func(i, k int) bool { return tasks[i].GUID < tasks[k].GUID })
	return tasks, version, nil
}

func taskNotFound(guid string) error {
	return fmt.Errorf("task %s: %w", guid, opi.ErrNotFound)
}
