package store

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/opi"
)

// LRPEvents is what FollowLRPs registers its handlers on (a *Store).
type LRPEvents interface {
	AddWorkloadHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	RemoveWorkloadHandler(r cache.ResourceEventHandlerRegistration) error
	AddPodHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	RemovePodHandler(r cache.ResourceEventHandlerRegistration) error
}

// FollowLRPs hands add the LRP key ("<guid>/<version>", see LRPFromKey) of every workload and
// pod event of events: the cached ones at once, then each change (a deleted object's last
// state included); objects without a key are passed over. stop removes both handlers; on an
// error nothing stays registered. Leader work driven by the LRPs' changes (route
// registrations, lifecycle lines) queues the keys and syncs one LRP at a time.
func FollowLRPs(events LRPEvents, add func(lrpKey string)) (stop func(), err error) {
	enqueue := func(obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if ref, ok := obj.(interface{ LRPKey() string }); ok && ref.LRPKey() != "" {
			add(ref.LRPKey())
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}
	workloads, err := events.AddWorkloadHandler(handler)
	if err != nil {
		return nil, fmt.Errorf("following the workloads: %w", err)
	}
	pods, err := events.AddPodHandler(handler)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("following the pods: %w", err), events.RemoveWorkloadHandler(workloads))
	}
	return func() {
		_ = events.RemovePodHandler(pods)
		_ = events.RemoveWorkloadHandler(workloads)
	}, nil
}

// LRPFromKey is the LRP identifier of an LRP key (the lrp index's, as FollowLRPs hands them).
func LRPFromKey(lrpKey string) opi.LRPIdentifier {
	guid, version, _ := strings.Cut(lrpKey, "/")
	return opi.LRPIdentifier{GUID: guid, Version: version}
}
