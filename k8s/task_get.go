package k8s

import (
	"context"
	"fmt"
	"sort"

	"github.com/opi-bridge/opi/opi"
)

// GetTask reads the task from the Job cache (no API call), until its Job is deleted (a
// retention after CC accepted its end). ErrNotFound otherwise.
func (b *Backend) GetTask(_ context.Context, guid string) (*opi.Task, error) {
	if err := b.checkSynced(); err != nil {
		return nil, err
	}
	j, ok := b.cachedJob(TaskJobName(guid))
	if !ok || j.taskGUID != guid {
		return nil, taskNotFound(guid)
	}
	return j.task(), nil
}

// ListTasks returns, from the Job cache (no API call), every task CC has not been told the end
// of, ordered by guid: CC's task sync fails a task it holds as running that is neither listed
// nor found, so a task stays listed until its end was reported.
func (b *Backend) ListTasks(_ context.Context) ([]*opi.Task, error) {
	if err := b.checkSynced(); err != nil {
		return nil, err
	}
	jobs := b.cachedJobs()
	tasks := make([]*opi.Task, 0, len(jobs))
	for _, j := range jobs {
		if j.reported == "" && j.DeletionTimestamp == nil && j.taskGUID != "" {
			tasks = append(tasks, j.task())
		}
	}
	sort.Slice(tasks, func(i, k int) bool { return tasks[i].GUID < tasks[k].GUID })
	return tasks, nil
}

func taskNotFound(guid string) error {
	return fmt.Errorf("task %s: %w", guid, opi.ErrNotFound)
}
