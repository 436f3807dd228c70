package objects

import (
	"encoding/json"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// Desire is every object one desire of an LRP writes but the hooks' own, built from one
// Identity, before anything is written. The workload object itself is the kind's to build
// (workload.Kind.Build) from Meta, Selector, Replicas, MinReadySeconds and Template.
type Desire struct {
	Identity Identity
	// Secrets are the env Secret, then the registry Secret when the LRP has registry
	// credentials: the order a desire writes them in.
	Secrets []*corev1.Secret
	// Meta is the workload's name, namespace, labels and opi's annotations: everything CC may
	// read back but the pod template (see the store's records), the same for every kind.
	Meta metav1.ObjectMeta
	// Selector selects the workload's pods.
	Selector        map[string]string
	Replicas        int32
	MinReadySeconds int32
	// Template is the pod template, the same for every workload kind.
	Template corev1.PodTemplateSpec
	// ServiceMeta is the metadata of the Service the service hook makes for an LRP with ports
	// (nil without ports), for the checks before the first write.
	ServiceMeta *metav1.ObjectMeta
}

// ForDesire builds the objects of one desire of lrp in namespace, with the operator's pod
// settings w: the identity once, then each object from it. Each object gets its own copy of
// the identity's maps, since the hooks add to the workload's before it is created.
func ForDesire(lrp *opi.LRP, namespace string, w Workload) (Desire, error) {
	id := IdentityOf(lrp, namespace)
	secrets, env, err := lrpSecrets(lrp, id, w.InstanceIndexEnv)
	if err != nil {
		return Desire{}, err
	}
	d := Desire{
		Identity:        id,
		Secrets:         secrets,
		Meta:            id.objectMeta(id.Name),
		Selector:        maps.Clone(id.Selector),
		Replicas:        lrp.Instances,
		MinReadySeconds: w.MinReadySeconds,
		Template:        podTemplate(lrp, id, env, w),
	}
	d.Meta.Annotations = maps.Clone(id.Annotations)
	if len(lrp.Ports) > 0 {
		meta := id.objectMeta(id.Name)
		d.ServiceMeta = &meta
	}
	return d, nil
}

// Identity is what every object of an LRP is named and labelled by, computed once per desire:
// names' part (the workload's name, the labels, the pod selector), the namespace, the Secrets'
// names and the workload's annotations. Its maps are shared: a builder copies what it puts on
// an object.
type Identity struct {
	names.LRPIdentity
	Namespace string
	// EnvSecretName and RegistrySecretName name the LRP's Secrets.
	EnvSecretName      string
	RegistrySecretName string
	// Annotations are the workload's: what reads report back that does not fit a label.
	Annotations map[string]string
}

// IdentityOf is the identity of lrp's objects in namespace.
func IdentityOf(lrp *opi.LRP, namespace string) Identity {
	n := names.IdentityOf(lrp)
	return Identity{
		LRPIdentity:        n,
		Namespace:          namespace,
		EnvSecretName:      n.Name + names.EnvSecretSuffix,
		RegistrySecretName: n.Name + names.RegistrySecretSuffix,
		Annotations:        workloadAnnotations(lrp),
	}
}

// objectMeta is the metadata of the LRP's object named name: the namespace and a copy of the
// labels.
func (id Identity) objectMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: id.Namespace, Labels: maps.Clone(id.Labels)}
}

// workloadAnnotations are opi's annotations on the workload.
func workloadAnnotations(lrp *opi.LRP) map[string]string {
	healthJSON, _ := json.Marshal(HealthCheckJSON{
		Type:           lrp.Health.Type,
		Endpoint:       lrp.Health.Endpoint,
		TimeoutMs:      lrp.Health.TimeoutMs,
		StartTimeoutMs: lrp.Health.StartTimeoutMs,
	})
	return map[string]string{
		names.AnnotationProcessGUID: lrp.ProcessGUID(),
		names.AnnotationLastUpdated: lrp.LastUpdated,
		names.AnnotationProcessType: lrp.ProcessType,
		names.AnnotationAppName:     lrp.AppName,
		names.AnnotationSpaceName:   lrp.SpaceName,
		names.AnnotationSpaceGUID:   lrp.SpaceGUID,
		names.AnnotationOrgName:     lrp.OrganizationName,
		names.AnnotationOrgGUID:     lrp.OrganizationGUID,
		names.AnnotationRoutes:      RoutesAnnotation(lrp.Routes),
		names.AnnotationHealthCheck: string(healthJSON),
	}
}

// RouteJSON is a route in names.AnnotationRoutes.
type RouteJSON struct {
	Hostname string `json:"hostname"`
	Port     int32  `json:"port"`
}

// HealthCheckJSON is names.AnnotationHealthCheck.
type HealthCheckJSON struct {
	Type           string `json:"type"`
	Endpoint       string `json:"endpoint,omitempty"`
	TimeoutMs      int64  `json:"timeout_ms,omitempty"`
	StartTimeoutMs int64  `json:"start_timeout_ms,omitempty"`
}

// RoutesAnnotation is the value of names.AnnotationRoutes: JSON [{"hostname","port"}].
func RoutesAnnotation(routes []opi.Route) string {
	out := make([]RouteJSON, 0, len(routes))
	for _, r := range routes {
		out = append(out, RouteJSON{Hostname: r.Hostname, Port: r.Port})
	}
	b, _ := json.Marshal(out) // strings and ints always marshal
	return string(b)
}
