package task

import (
	batchv1 "k8s.io/api/batch/v1"
)

// cachedAsJob is the named Job from the cache, as what a desire needs of one that exists.
func (s *Service) cachedAsJob(name string) (*batchv1.Job, bool) {
	r, ok := s.cache.Job(name)
	if !ok {
		return nil, false
	}
	return r.AsJob(), true
}
