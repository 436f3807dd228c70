package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"code.cloudfoundry.org/lager/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// runAsLeader runs work (until ctx ends) on whichever replica holds the Lease: every replica
// contends, the holder runs work, and a replica that loses the Lease stops its work and contends
// again. Without leader election, work simply runs until ctx ends. It returns when ctx ends and
// work has returned.
//
// The Lease is given up only once work has returned: client-go's own release on cancel
// (ReleaseOnCancel) runs while OnStartedLeading's goroutine may still be working, so that the
// next leader's reporters could overlap the old one's. Here the elector does not release;
// after each term, work is waited for, and then the Lease is released if it still names this
// replica.
func runAsLeader(ctx context.Context, cfg LeaderElectionConfig, client kubernetes.Interface, namespace string, logger lager.Logger, work func(context.Context)) error {
	if !cfg.Enabled {
		work(ctx)
		return nil
	}
	host, _ := os.Hostname()
	identity := host + "_" + string(uuid.NewUUID())
	logger = logger.Session("leader-election", lager.Data{"lease": namespace + "/" + cfg.LeaseName, "identity": identity})
	lock := &termLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: cfg.LeaseName, Namespace: namespace},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: cfg.LeaseDuration.Duration,
		RenewDeadline: cfg.RenewDeadline.Duration,
		RetryPeriod:   cfg.RetryPeriod.Duration,
		// Released below, once work has returned.
		ReleaseOnCancel: false,
		Name:            "opi",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				defer lock.workReturned()
				logger.Info("leading")
				work(ctx)
			},
			OnStoppedLeading: func() { logger.Info("stopped-leading") },
			OnNewLeader: func(id string) {
				if id != identity {
					logger.Info("following", lager.Data{"leader": id})
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	// Run returns when leadership is lost (or ctx ends), without waiting for work: wait for it,
	// give the Lease up, and contend again until ctx ends.
	for ctx.Err() == nil {
		elector.Run(ctx)
		if lock.waitForWork() {
			releaseLease(lock.Interface, cfg.RenewDeadline.Duration, logger)
		}
	}
	return nil
}

// termLock is the Lease lock, which notes when this replica became the holder (the elector
// calls OnStartedLeading in a goroutine of its own right after, so a term is known to exist
// before that goroutine may even have started).
type termLock struct {
	resourcelock.Interface
	mu   sync.Mutex
	done chan struct{} // the term's work has returned when closed; nil: no term
}

// Create notes a term when the new Lease names this replica.
func (l *termLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, ler)
	if err == nil {
		l.held(ler)
	}
	return err
}

// Update notes a term when the Lease now names this replica (an acquisition; renewals leave the
// open term as it is).
func (l *termLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, ler)
	if err == nil {
		l.held(ler)
	}
	return err
}

func (l *termLock) held(ler resourcelock.LeaderElectionRecord) {
	if ler.HolderIdentity != l.Identity() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		l.done = make(chan struct{})
	}
}

// workReturned ends the open term.
func (l *termLock) workReturned() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done != nil {
		close(l.done)
	}
}

// waitForWork waits for the open term's work to return and closes the term; it tells whether
// there was one.
func (l *termLock) waitForWork() bool {
	l.mu.Lock()
	done := l.done
	l.mu.Unlock()
	if done == nil {
		return false
	}
	<-done
	l.mu.Lock()
	l.done = nil
	l.mu.Unlock()
	return true
}

// releaseLease gives up the Lease, as client-go's release does, if it still names this replica:
// another replica takes it over at its next retry instead of after the lease duration.
func releaseLease(lock resourcelock.Interface, timeout time.Duration, logger lager.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		record, _, err := lock.Get(ctx)
		if err != nil {
			logger.Error("release-lease-failed", err)
			return
		}
		if record.HolderIdentity != lock.Identity() {
			return
		}
		now := metav1.NewTime(time.Now())
		err = lock.Update(ctx, resourcelock.LeaderElectionRecord{
			LeaderTransitions: record.LeaderTransitions, LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now,
		})
		if err == nil {
			logger.Info("released-lease")
			return
		}
		if !apierrors.IsConflict(err) || ctx.Err() != nil {
			logger.Error("release-lease-failed", err)
			return
		}
	}
}
