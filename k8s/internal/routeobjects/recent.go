package routeobjects

import (
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// recentTTL is how long a written object stands in for the cache's look at most: when its
// event never comes (a relist that skipped the version), the cache is trusted again after it.
const recentTTL = 30 * time.Second

// recent are the route objects of one kind this term created or updated, by name, each kept
// until its informer's event of that very version arrives (then the cache holds it) or for
// recentTTL. A sync that runs in between (under a burst, the informer is often a moment behind
// the controller's own writes) compares with what was written, not with the cache's older look
// or its absence, and so does not make the same write again, which the API server would refuse
// as existing or conflicting. Nothing else is kept: a new term starts with none, and the
// objects in the API server stay the only record of what was written.
type recent struct {
	now func() time.Time

	mu      sync.Mutex
	objs    map[string]*recentObject
	sweepAt time.Time
}

// recentObject is a write of one object: in flight (obj nil; the versions of the events that
// came meanwhile in seen, since the event of the write itself may come before its answer), or
// answered.
type recentObject struct {
	obj  metav1.Object
	seen []string
	at   time.Time
}

func newRecent() *recent { return &recent{now: time.Now, objs: map[string]*recentObject{}} }

// writing says a write of the object of name is about to be sent.
func (r *recent) writing(name string) {
	if r == nil {
		return
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.objs[name] = &recentObject{at: now}
	// Entries whose event never came go at most once per recentTTL.
	if now.After(r.sweepAt) {
		for name, o := range r.objs {
			if now.Sub(o.at) >= recentTTL {
				delete(r.objs, name)
			}
		}
		r.sweepAt = now.Add(recentTTL)
	}
}

// wrote is the answer to the write of name: obj as the API server answered it, without its
// managed fields, like the cache's copies (it is kept, not copied), or nil when the write
// failed. obj is kept until its event, unless that came already.
func (r *recent) wrote(name string, obj metav1.Object) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.objs[name]
	switch {
	case !ok:
	case obj == nil || slices.Contains(w.seen, obj.GetResourceVersion()):
		delete(r.objs, name)
	default:
		w.obj, w.seen, w.at = obj, nil, r.now()
	}
}

// seen is the informer's event of obj: once the cache holds the version written, it is the
// cache's look again.
func (r *recent) seen(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	o, ok := obj.(metav1.Object)
	if r == nil || !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.objs[o.GetName()]
	switch {
	case !ok:
	case w.obj == nil:
		w.seen = append(w.seen, o.GetResourceVersion())
	case w.obj.GetResourceVersion() == o.GetResourceVersion():
		delete(r.objs, o.GetName())
	}
}

// get is the object of name written and not yet seen, if there is one younger than recentTTL.
func (r *recent) get(name string) (metav1.Object, bool) {
	if r == nil {
		return nil, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.objs[name]
	if !ok || w.obj == nil {
		return nil, false
	}
	if r.now().Sub(w.at) >= recentTTL {
		delete(r.objs, name)
		return nil, false
	}
	return w.obj, true
}

// len is how many writes are in flight or wait for their event.
func (r *recent) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.objs)
}

// latest is the object of name as this term last wrote it, while its event has not come, else
// as cached; ok is false when neither has it.
func latest[T metav1.Object](written *recent, name string, cached map[string]T) (T, bool) {
	if obj, fresh := written.get(name); fresh {
		if t, ok := obj.(T); ok {
			return t, true
		}
	}
	t, ok := cached[name]
	return t, ok
}
