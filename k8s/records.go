package k8s

import (
	"encoding/json"
	"math"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/spec"
	"github.com/opi-bridge/opi/opi"
)

// The informer caches hold records, not Kubernetes objects: a record keeps only what reads and
// writes take from the cache, in plain fields rather than the maps, quantities and nested
// structs of a Deployment or pod. A decoded Deployment or pod is several kilobytes; its record
// a few hundred bytes, which at thousands of apps is most of opi's memory. Records embed an
// ObjectMeta with identity, version and timestamps only (no labels or annotations), so the
// informer's key functions work on them.

// workloadRecord is an LRP's workload (Deployment or StatefulSet) as the cache holds it.
// Shared: do not modify.
type workloadRecord struct {
	metav1.ObjectMeta
	lrpRef
	appGUID string
	// replicas is spec.replicas (1 when unset, the API server's default).
	replicas int32

	// opi's annotations, as written by spec.Deployment.
	processType, appName, spaceGUID, spaceName, orgGUID, orgName string
	lastUpdated, routesJSON, healthCheckJSON                     string
	// egressJSON is spec.AnnotationEgressRules, "" without rules.
	egressJSON string

	// The app container's image, command (as written: $ escaped), ports and resources.
	image            string
	command          []string
	ports            []int32
	memoryMB, diskMB int64
	cpuWeight        int32
	// userAnnotations are the pod template's annotations (CC's user-defined annotations).
	userAnnotations map[string]string
	// pullsWithSecret: the pod template names the LRP's image pull Secret.
	pullsWithSecret bool
}

// recordWorkload is the workload informer's transform (Deployments or StatefulSets). Anything
// else (a record already, a tombstone) passes unchanged.
func recordWorkload(obj any) (any, error) {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		return workloadRecordOf(&w.ObjectMeta, w.Spec.Replicas, &w.Spec.Template), nil
	case *appsv1.StatefulSet:
		return workloadRecordOf(&w.ObjectMeta, w.Spec.Replicas, &w.Spec.Template), nil
	}
	return obj, nil
}

// workloadRecordOf is the record of a Deployment or StatefulSet: both keep what CC reads back
// in the same places (labels, annotations, replicas, the pod template).
func workloadRecordOf(meta *metav1.ObjectMeta, replicas *int32, template *corev1.PodTemplateSpec) *workloadRecord {
	labels, ann := meta.Labels, meta.Annotations
	r := &workloadRecord{
		ObjectMeta: metav1.ObjectMeta{
			Name:              meta.Name,
			Namespace:         meta.Namespace,
			UID:               meta.UID,
			ResourceVersion:   meta.ResourceVersion,
			Generation:        meta.Generation,
			CreationTimestamp: meta.CreationTimestamp,
			DeletionTimestamp: meta.DeletionTimestamp,
		},
		lrpRef:          lrpRefOf(labels),
		appGUID:         labels[spec.LabelAppGUID],
		replicas:        1,
		processType:     ann[spec.AnnotationProcessType],
		appName:         ann[spec.AnnotationAppName],
		spaceGUID:       ann[spec.AnnotationSpaceGUID],
		spaceName:       ann[spec.AnnotationSpaceName],
		orgGUID:         ann[spec.AnnotationOrgGUID],
		orgName:         ann[spec.AnnotationOrgName],
		lastUpdated:     ann[spec.AnnotationLastUpdated],
		routesJSON:      ann[spec.AnnotationRoutes],
		healthCheckJSON: ann[spec.AnnotationHealthCheck],
		egressJSON:      ann[spec.AnnotationEgressRules],
		userAnnotations: template.Annotations,
	}
	if r.processType == "" {
		r.processType = labels[spec.LabelProcessType]
	}
	if replicas != nil {
		r.replicas = *replicas
	}
	if len(r.userAnnotations) == 0 {
		r.userAnnotations = nil
	}
	for _, s := range template.Spec.ImagePullSecrets {
		r.pullsWithSecret = r.pullsWithSecret || s.Name == spec.RegistrySecretName(meta.Name)
	}
	if c := spec.AppContainer(&template.Spec); c != nil {
		r.image = c.Image
		r.command = c.Command
		if len(c.Ports) > 0 {
			r.ports = make([]int32, len(c.Ports))
			for i, p := range c.Ports {
				r.ports[i] = p.ContainerPort
			}
		}
		const mi = 1024 * 1024
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			r.memoryMB = q.Value() / mi
		}
		if q, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
			r.diskMB = q.Value() / mi
		}
		if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
			// Inverse of spec's resources(); weights below 1 read back as 1 (the 10m floor).
			r.cpuWeight = int32(min(q.MilliValue()/10, math.MaxInt32))
		}
	}
	return r
}

// lrpRef is opi's guid and version labels of a Deployment or pod, which the lrp index keys.
type lrpRef struct {
	guid, version string
}

func lrpRefOf(labels map[string]string) lrpRef {
	return lrpRef{guid: labels[spec.LabelGUID], version: labels[spec.LabelVersion]}
}

func (l lrpRef) id() opi.LRPIdentifier {
	return opi.LRPIdentifier{GUID: l.guid, Version: l.version}
}

// lrpKey is the key in the lrp index ("" without opi's labels).
func (l lrpRef) lrpKey() string {
	if l.guid == "" || l.version == "" {
		return ""
	}
	return lrpIndexKey(l.id())
}

// meta is the record's identity, version and opi's guid and version labels: what a write
// needs of an existing workload (owner references, the same-LRP check).
func (r *workloadRecord) meta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              r.Name,
		Namespace:         r.Namespace,
		UID:               r.UID,
		ResourceVersion:   r.ResourceVersion,
		Generation:        r.Generation,
		CreationTimestamp: r.CreationTimestamp,
		DeletionTimestamp: r.DeletionTimestamp,
		Labels:            map[string]string{spec.LabelGUID: r.guid, spec.LabelVersion: r.version},
	}
}

// lrp recovers the LRP from its workload. Env and registry credentials are not read back.
func (r *workloadRecord) lrp() *opi.LRP {
	lrp := &opi.LRP{
		LRPIdentifier:    r.id(),
		ProcessType:      r.processType,
		AppGUID:          r.appGUID,
		AppName:          r.appName,
		SpaceGUID:        r.spaceGUID,
		SpaceName:        r.spaceName,
		OrganizationGUID: r.orgGUID,
		OrganizationName: r.orgName,
		LastUpdated:      r.lastUpdated,
		ModificationTag:  opi.ModificationTag{Epoch: string(r.UID), Index: r.Generation},
		Instances:        r.replicas,
		Image:            r.image,
		Command:          spec.UnescapeCommand(r.command),
		MemoryMB:         r.memoryMB,
		DiskMB:           r.diskMB,
		CPUWeight:        r.cpuWeight,
	}
	if len(r.ports) > 0 {
		lrp.Ports = append([]int32(nil), r.ports...)
	}
	var routes []spec.RouteJSON
	if err := json.Unmarshal([]byte(r.routesJSON), &routes); err == nil {
		for _, rt := range routes {
			lrp.Routes = append(lrp.Routes, opi.Route{Hostname: rt.Hostname, Port: rt.Port})
		}
	}
	lrp.EgressRules = spec.ParseEgressAnnotation(r.egressJSON)
	var health spec.HealthCheckJSON
	if err := json.Unmarshal([]byte(r.healthCheckJSON), &health); err == nil {
		lrp.Health = opi.HealthCheck{
			Type:           health.Type,
			Endpoint:       health.Endpoint,
			TimeoutMs:      health.TimeoutMs,
			StartTimeoutMs: health.StartTimeoutMs,
		}
	}
	if len(r.userAnnotations) > 0 {
		lrp.UserDefinedAnnotations = make(map[string]string, len(r.userAnnotations))
		for k, v := range r.userAnnotations {
			lrp.UserDefinedAnnotations[k] = v
		}
	}
	return lrp
}

// schedulingLRP is only what a list carries: identity, app guid, instances, memory and disk,
// LastUpdated and the modification tag. CC lists every app every 30 seconds; parsing routes and
// health checks of thousands of apps for it would be waste.
func (r *workloadRecord) schedulingLRP() *opi.LRP {
	return &opi.LRP{
		LRPIdentifier:   r.id(),
		AppGUID:         r.appGUID,
		LastUpdated:     r.lastUpdated,
		ModificationTag: opi.ModificationTag{Epoch: string(r.UID), Index: r.Generation},
		Instances:       r.replicas,
		MemoryMB:        r.memoryMB,
		DiskMB:          r.diskMB,
	}
}

// podRecord is a pod of an LRP as the cache holds it: its identity, its creation and deletion
// times (which rank it), and the Diego instance state it reports, worked out when the pod
// changes rather than on every read. Shared: do not modify.
type podRecord struct {
	metav1.ObjectMeta
	lrpRef

	state          string
	since          int64
	placementError string
	// crash is nil unless the app container has terminated: see crashOf.
	crash       *podCrash
	crashReason string
	// terminal: the pod failed (or succeeded) for good; its ReplicaSet has replaced it.
	terminal bool
	// image is the app container's image: a pod whose image is not its Deployment's is of an
	// older template (see superseded).
	image string
	// ordinal is a StatefulSet pod's ordinal (its pod-index label), -1 for other pods.
	ordinal int32
}

// recordPod is the pod informer's transform.
func recordPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	state, since, placement, reason := instanceState(p)
	var image string
	if c := spec.AppContainer(&p.Spec); c != nil {
		image = c.Image
	}
	return &podRecord{
		ObjectMeta: metav1.ObjectMeta{
			Name:              p.Name,
			Namespace:         p.Namespace,
			UID:               p.UID,
			ResourceVersion:   p.ResourceVersion,
			CreationTimestamp: p.CreationTimestamp,
			DeletionTimestamp: p.DeletionTimestamp,
		},
		lrpRef:         lrpRefOf(p.Labels),
		state:          state,
		since:          since,
		placementError: placement,
		crash:          crashOf(p),
		crashReason:    reason,
		terminal:       p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded,
		image:          image,
		ordinal:        podOrdinal(p.Labels),
	}, nil
}

// podOrdinal is the StatefulSet controller's pod-index label as a number, -1 when absent or
// not a number.
func podOrdinal(labels map[string]string) int32 {
	v, ok := labels[appsv1.PodIndexLabel]
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return -1
	}
	return int32(n)
}

// superseded says the pod is of an older pod template than its Deployment's, as during a
// rollout: the image is the only template field opi changes after a desire (UpdateLRP), so it
// tells the templates apart without caching ReplicaSets for their pod-template-hash.
func (r *podRecord) superseded(d *workloadRecord) bool {
	return r.image != "" && d.image != "" && r.image != d.image
}

// instance is the pod's report at index.
func (r *podRecord) instance(index int32) *opi.Instance {
	return &opi.Instance{Index: index, State: r.state, Since: r.since, PlacementError: r.placementError, CrashReason: r.crashReason}
}
