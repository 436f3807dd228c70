package store

import (
	"encoding/json"
	"math"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// The informer caches hold records, not Kubernetes objects: a record keeps only what reads and
// writes take from the cache, in plain fields rather than the maps, quantities and nested
// structs of a workload or pod. A decoded workload or pod is several kilobytes; its record
// a few hundred bytes, which at thousands of apps is most of opi's memory. Records embed an
// ObjectMeta with identity, version and timestamps only (no labels or annotations), so the
// informer's key functions work on them. Records are shared by every reader: never modify one.

// WorkloadRecord is an LRP's workload (Deployment or StatefulSet) as the cache holds it.
type WorkloadRecord struct {
	metav1.ObjectMeta
	LRPRef
	AppGUID string
	// ReplicaCount is spec.replicas (1 when unset, the API server's default).
	ReplicaCount int32

	// opi's annotations, as a desire writes them (objects.Desire.Meta).
	ProcessType, AppName, SpaceGUID, SpaceName, OrgGUID, OrgName string
	LastUpdated                                                  string
	// RoutesAnnotation, HealthCheckAnnotation and EgressAnnotation are the JSON annotations
	// (names.AnnotationRoutes, AnnotationHealthCheck, AnnotationEgressRules; "" when absent).
	RoutesAnnotation, HealthCheckAnnotation, EgressAnnotation string

	// The app container's image, command (as written: $ escaped), ports and resources.
	Image            string
	Command          []string
	Ports            []int32
	MemoryMB, DiskMB int64
	CPUWeight        int32
	// UserAnnotations are the pod template's annotations (CC's user-defined annotations).
	UserAnnotations map[string]string
	// PullsWithSecret: the pod template names the LRP's image pull Secret.
	PullsWithSecret bool
}

// RecordWorkload is the workload informer's transform (Deployments or StatefulSets). Anything
// else (a record already, a tombstone) passes unchanged.
func RecordWorkload(obj any) (any, error) {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		return WorkloadRecordOf(&w.ObjectMeta, w.Spec.Replicas, &w.Spec.Template), nil
	case *appsv1.StatefulSet:
		return WorkloadRecordOf(&w.ObjectMeta, w.Spec.Replicas, &w.Spec.Template), nil
	}
	return obj, nil
}

// WorkloadRecordOf is the record of a Deployment or StatefulSet: both keep what CC reads back
// in the same places (labels, annotations, replicas, the pod template).
func WorkloadRecordOf(meta *metav1.ObjectMeta, replicas *int32, template *corev1.PodTemplateSpec) *WorkloadRecord {
	labels, ann := meta.Labels, meta.Annotations
	r := &WorkloadRecord{
		ObjectMeta:            identity(meta, meta.Generation),
		LRPRef:                LRPRefOf(labels),
		AppGUID:               labels[names.LabelAppGUID],
		ReplicaCount:          1,
		ProcessType:           ann[names.AnnotationProcessType],
		AppName:               ann[names.AnnotationAppName],
		SpaceGUID:             ann[names.AnnotationSpaceGUID],
		SpaceName:             ann[names.AnnotationSpaceName],
		OrgGUID:               ann[names.AnnotationOrgGUID],
		OrgName:               ann[names.AnnotationOrgName],
		LastUpdated:           ann[names.AnnotationLastUpdated],
		RoutesAnnotation:      ann[names.AnnotationRoutes],
		HealthCheckAnnotation: ann[names.AnnotationHealthCheck],
		EgressAnnotation:      ann[names.AnnotationEgressRules],
		UserAnnotations:       template.Annotations,
	}
	if r.ProcessType == "" {
		r.ProcessType = labels[names.LabelProcessType]
	}
	if replicas != nil {
		r.ReplicaCount = *replicas
	}
	if len(r.UserAnnotations) == 0 {
		r.UserAnnotations = nil
	}
	for _, s := range template.Spec.ImagePullSecrets {
		r.PullsWithSecret = r.PullsWithSecret || s.Name == names.RegistrySecretName(meta.Name)
	}
	if c := names.AppContainer(&template.Spec); c != nil {
		r.Image = c.Image
		r.Command = c.Command
		if len(c.Ports) > 0 {
			r.Ports = make([]int32, len(c.Ports))
			for i, p := range c.Ports {
				r.Ports[i] = p.ContainerPort
			}
		}
		const mi = 1024 * 1024
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
			r.MemoryMB = q.Value() / mi
		}
		if q, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]; ok {
			r.DiskMB = q.Value() / mi
		}
		if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
			// Inverse of spec's resources(); weights below 1 read back as 1 (the 10m floor).
			r.CPUWeight = int32(min(q.MilliValue()/10, math.MaxInt32))
		}
	}
	return r
}

// identity is what a record keeps of an object's metadata: its identity, version and
// timestamps (and generation, for workloads), no labels or annotations.
func identity(m *metav1.ObjectMeta, generation int64) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		Generation:        generation,
		CreationTimestamp: m.CreationTimestamp,
		DeletionTimestamp: m.DeletionTimestamp,
	}
}

// LRPRef is opi's guid and version labels of a workload or pod, which the lrp index keys.
type LRPRef struct {
	GUID, Version string
}

// LRPRefOf reads the guid and version labels.
func LRPRefOf(labels map[string]string) LRPRef {
	return LRPRef{GUID: labels[names.LabelGUID], Version: labels[names.LabelVersion]}
}

// ID is the LRP's identifier.
func (l LRPRef) ID() opi.LRPIdentifier {
	return opi.LRPIdentifier{GUID: l.GUID, Version: l.Version}
}

// LRPKey is the key in the lrp index ("" without opi's labels).
func (l LRPRef) LRPKey() string {
	if l.GUID == "" || l.Version == "" {
		return ""
	}
	return lrpIndexKey(l.ID())
}

// Meta is the record's identity, version and opi's guid and version labels: what a write
// needs of an existing workload (owner references, the same-LRP check).
func (r *WorkloadRecord) Meta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              r.Name,
		Namespace:         r.Namespace,
		UID:               r.UID,
		ResourceVersion:   r.ResourceVersion,
		Generation:        r.Generation,
		CreationTimestamp: r.CreationTimestamp,
		DeletionTimestamp: r.DeletionTimestamp,
		Labels:            map[string]string{names.LabelGUID: r.GUID, names.LabelVersion: r.Version},
	}
}

// LRP recovers the LRP from its workload. Env and registry credentials are not read back.
func (r *WorkloadRecord) LRP() *opi.LRP {
	lrp := &opi.LRP{
		LRPIdentifier:    r.ID(),
		ProcessType:      r.ProcessType,
		AppGUID:          r.AppGUID,
		AppName:          r.AppName,
		SpaceGUID:        r.SpaceGUID,
		SpaceName:        r.SpaceName,
		OrganizationGUID: r.OrgGUID,
		OrganizationName: r.OrgName,
		LastUpdated:      r.LastUpdated,
		ModificationTag:  opi.ModificationTag{Epoch: string(r.UID), Index: r.Generation},
		Instances:        r.ReplicaCount,
		Image:            r.Image,
		Command:          objects.UnescapeCommand(r.Command),
		MemoryMB:         r.MemoryMB,
		DiskMB:           r.DiskMB,
		CPUWeight:        r.CPUWeight,
	}
	if len(r.Ports) > 0 {
		lrp.Ports = append([]int32(nil), r.Ports...)
	}
	lrp.Routes = r.Routes()
	lrp.EgressRules = objects.ParseEgressAnnotation(r.EgressAnnotation)
	var health objects.HealthCheckJSON
	if err := json.Unmarshal([]byte(r.HealthCheckAnnotation), &health); err == nil {
		lrp.Health = opi.HealthCheck{
			Type:           health.Type,
			Endpoint:       health.Endpoint,
			TimeoutMs:      health.TimeoutMs,
			StartTimeoutMs: health.StartTimeoutMs,
		}
	}
	if len(r.UserAnnotations) > 0 {
		lrp.UserDefinedAnnotations = make(map[string]string, len(r.UserAnnotations))
		for k, v := range r.UserAnnotations {
			lrp.UserDefinedAnnotations[k] = v
		}
	}
	return lrp
}

// Routes are the LRP's routes, decoded from their annotation (nil when absent or unreadable).
func (r *WorkloadRecord) Routes() []opi.Route {
	var routes []objects.RouteJSON
	if err := json.Unmarshal([]byte(r.RoutesAnnotation), &routes); err != nil {
		return nil
	}
	var out []opi.Route
	for _, rt := range routes {
		out = append(out, opi.Route{Hostname: rt.Hostname, Port: rt.Port})
	}
	return out
}

// SchedulingLRP is only what a list carries: identity, app guid, instances, memory and disk,
// LastUpdated and the modification tag. CC lists every app every 30 seconds; parsing routes and
// health checks of thousands of apps for it would be waste.
func (r *WorkloadRecord) SchedulingLRP() *opi.LRP {
	return &opi.LRP{
		LRPIdentifier:   r.ID(),
		AppGUID:         r.AppGUID,
		LastUpdated:     r.LastUpdated,
		ModificationTag: opi.ModificationTag{Epoch: string(r.UID), Index: r.Generation},
		Instances:       r.ReplicaCount,
		MemoryMB:        r.MemoryMB,
		DiskMB:          r.DiskMB,
	}
}

// The read interface the hooks' Missing takes (hooks.Workload).

// Replicas is spec.replicas.
func (r *WorkloadRecord) Replicas() int32 { return r.ReplicaCount }

// HasPorts tells whether the LRP has ports.
func (r *WorkloadRecord) HasPorts() bool { return len(r.Ports) > 0 }

// EgressJSON is names.AnnotationEgressRules, "" without rules.
func (r *WorkloadRecord) EgressJSON() string { return r.EgressAnnotation }

// RoutesJSON is the routes' annotation.
func (r *WorkloadRecord) RoutesJSON() string { return r.RoutesAnnotation }

// PodRecord is a pod of an LRP as the cache holds it: its identity, its creation and deletion
// times (which rank it), and the Diego instance state it reports, worked out when the pod
// changes rather than on every read.
type PodRecord struct {
	metav1.ObjectMeta
	LRPRef

	State          string
	Since          int64
	PlacementError string
	// Crash is nil unless the app container has terminated: see crashOf.
	Crash       *PodCrash
	CrashReason string
	// Terminal: the pod failed (or succeeded) for good; its ReplicaSet has replaced it.
	Terminal bool
	// Image is the app container's image: a pod whose image is not its workload's is of an
	// older template (see Superseded).
	Image string
	// Ordinal is a StatefulSet pod's ordinal (its pod-index label), -1 for other pods.
	Ordinal int32
	// IP is the pod's IP ("" until it has one) and Node the node it is bound to ("" until
	// scheduled): where a router reaches the instance.
	IP, Node string
	// ReadySince is when the pod last became Ready, in Unix nanoseconds; 0 while it is not
	// Ready (or being deleted): only a Ready pod is routed to.
	ReadySince int64
	// Steps are what the leader's lifecycle lines are made of (see PodSteps).
	Steps PodSteps
}

// Routable says a router may send requests to the pod: it is Ready, has an IP, and is neither
// being deleted nor terminated for good.
func (p *PodRecord) Routable() bool {
	return p.ReadySince != 0 && p.IP != "" && p.DeletionTimestamp == nil && !p.Terminal
}

// RecordPod is the pod informer's transform.
func RecordPod(obj any) (any, error) { return recordAs(obj, PodRecordOf) }

// recordAs is an informer's transform for objects of type T: their record; anything else (a
// record already, a tombstone) passes unchanged.
func recordAs[T, R any](obj any, of func(T) R) (any, error) {
	o, ok := obj.(T)
	if !ok {
		return obj, nil
	}
	return of(o), nil
}

// PodRecordOf is the record of a pod.
func PodRecordOf(p *corev1.Pod) *PodRecord {
	state, since, placement, reason := instanceState(p)
	var image string
	if c := names.AppContainer(&p.Spec); c != nil {
		image = c.Image
	}
	return &PodRecord{
		ObjectMeta:     identity(&p.ObjectMeta, 0),
		LRPRef:         LRPRefOf(p.Labels),
		State:          state,
		Since:          since,
		PlacementError: placement,
		Crash:          crashOf(p),
		CrashReason:    reason,
		Terminal:       p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded,
		Image:          image,
		Ordinal:        podOrdinal(p.Labels),
		IP:             p.Status.PodIP,
		Node:           p.Spec.NodeName,
		ReadySince:     readySince(p),
		Steps:          podSteps(p),
	}
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

// Superseded says the pod is of an older pod template than its workload's, as during a
// rollout: the image is the only template field opi changes after a desire (UpdateLRP), so it
// tells the templates apart without caching ReplicaSets for their pod-template-hash.
func (r *PodRecord) Superseded(d *WorkloadRecord) bool {
	return r.Image != "" && d.Image != "" && r.Image != d.Image
}

// Instance is the pod's report at index.
func (r *PodRecord) Instance(index int32) *opi.Instance {
	return &opi.Instance{Index: index, State: r.State, Since: r.Since, PlacementError: r.PlacementError, CrashReason: r.CrashReason}
}

// Owes tells whether the pod has a crash not reported yet.
func (r *PodRecord) Owes() bool {
	return r.Crash != nil && r.Crash.Count > r.Crash.Reported && r.LRPKey() != ""
}
