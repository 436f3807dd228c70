package main

import (
	"context"
	"fmt"
	"time"

	"code.cloudfoundry.org/lager/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/gorouter"
	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/metrics"
)

// wireNATS hands the backend, in routing mode nats, the gorouter emitter (with opi's metrics)
// and, with kubernetes.node_zones, a zone look-up over a metadata-only informer of the nodes,
// started on ctx. It returns what the leader work must wait for before it starts (the nodes'
// cache synced; nil without it). The emitter connects when the leader work runs it: NATS down
// is logged and counted, and never makes opi unready.
func wireNATS(ctx context.Context, cfg Config, md metadata.Interface, logger lager.Logger, m *metrics.Metrics, opts *k8s.Options) (func() bool, error) {
	natsConfig := cfg.NATS.gorouter()
	emitter, err := gorouter.NewEmitter(natsConfig, logger.Session("gorouter"), m)
	if err != nil {
		return nil, fmt.Errorf("gorouter emitter: %w", err)
	}
	opts.Clients.Routes = emitter
	logger.Info("routing-nats", lager.Data{"nats": natsConfig.RedactedURLs(), "node-zones": cfg.NodeZones})
	if !cfg.NodeZones {
		return nil, nil
	}
	nodes := metadatainformer.NewFilteredMetadataInformer(md, corev1.SchemeGroupVersion.WithResource("nodes"),
		metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	opts.Clients.Zone = nodeZones(nodes.GetIndexer())
	go nodes.RunWithContext(ctx)
	return nodes.HasSynced, nil
}

// nodeZones reads a node's topology.kubernetes.io/zone label from the nodes' cache ("" for a
// node it does not hold or without the label).
func nodeZones(nodes cache.Store) func(node string) string {
	return func(node string) string {
		obj, ok, err := nodes.GetByKey(node)
		if err != nil || !ok {
			return ""
		}
		meta, ok := obj.(metav1.Object)
		if !ok {
			return ""
		}
		return meta.GetLabels()[corev1.LabelTopologyZone]
	}
}

// nodeSyncBound is how long the leader work waits for the nodes' cache before it registers
// without zones (a LIST of nodes that is forbidden never syncs: the cluster rule is missing).
const nodeSyncBound = 30 * time.Second

// waitForNodes waits, at most nodeSyncBound, for the nodes' cache (synced; nil: nothing to
// wait for), so that the first registrations carry their zones.
func waitForNodes(ctx context.Context, synced func() bool, logger lager.Logger) {
	if synced == nil {
		return
	}
	waitCtx, cancel := context.WithTimeout(ctx, nodeSyncBound)
	defer cancel()
	if !cache.WaitForCacheSync(waitCtx.Done(), synced) && ctx.Err() == nil {
		logger.Info("node-zones-not-synced", lager.Data{"waited": nodeSyncBound.String(),
			"note": "registrations go without availability_zone until the nodes are listed: is the node-zones cluster rule applied?"})
	}
}
