package main

import (
	"context"
	"fmt"
	"os"

	"code.cloudfoundry.org/lager/v3"
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
func runAsLeader(ctx context.Context, cfg LeaderElectionConfig, client kubernetes.Interface, namespace string, logger lager.Logger, work func(context.Context)) error {
	if !cfg.Enabled {
		work(ctx)
		return nil
	}
	host, _ := os.Hostname()
	identity := host + "_" + string(uuid.NewUUID())
	logger = logger.Session("leader-election", lager.Data{"lease": namespace + "/" + cfg.LeaseName, "identity": identity})
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: cfg.LeaseName, Namespace: namespace},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration.Duration,
		RenewDeadline:   cfg.RenewDeadline.Duration,
		RetryPeriod:     cfg.RetryPeriod.Duration,
		ReleaseOnCancel: true,
		Name:            "opi",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
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
	// Run returns when leadership is lost (or ctx ends): contend again until ctx ends.
	for ctx.Err() == nil {
		elector.Run(ctx)
	}
	return nil
}
