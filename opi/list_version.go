package opi

import "context"

// The interfaces below are optional: a backend that implements one lets the handler encode a
// list's response body once per version of the list and serve those bytes to every call of
// that version, instead of converting and encoding the whole list on every call (CC lists
// every app every 30 s, at thousands of apps). Without them every call encodes its own body.
//
// A list version is a number that grows whenever the list changes (it may also grow when the
// list does not). A version read after a write returned is therefore higher than every version
// read before the write changed the list (reads reflect writes).

// LRPListVersioner is the optional list version of an LRPReader.
//
//counterfeiter:generate -o ../fakes/lrp_list_versioner.go . LRPListVersioner
type LRPListVersioner interface {
	// LRPListVersion is the list's version now. It makes no orchestrator call and costs next
	// to nothing (no LRP is built).
	LRPListVersion(ctx context.Context) (uint64, error)
	// ListLRPsVersioned is ListLRPs and a version the list is at least as new as: the list
	// reflects every change that version counts.
	ListLRPsVersioned(ctx context.Context) ([]*LRP, uint64, error)
}

// TaskListVersioner is the optional list version of a TaskBackend, as LRPListVersioner.
//
//counterfeiter:generate -o ../fakes/task_list_versioner.go . TaskListVersioner
type TaskListVersioner interface {
	// TaskListVersion is the task list's version now.
	TaskListVersion(ctx context.Context) (uint64, error)
	// ListTasksVersioned is ListTasks and a version the list is at least as new as.
	ListTasksVersioned(ctx context.Context) ([]*Task, uint64, error)
}
