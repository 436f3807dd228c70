package objects

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/opi-bridge/opi/k8s/names"
	"math"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/opi"
)

const (
	// dockerHubServer is the registry key Docker (and the kubelet) use for Docker Hub.
	dockerHubServer = "https://index.docker.io/v1/"

	// RevisionHistoryLimit is how many old revisions a workload keeps (ReplicaSets or
	// ControllerRevisions).
	RevisionHistoryLimit          = 2
	terminationGracePeriodSeconds = 10

	// defaultStartTimeoutMs applies when CC sends no start timeout.
	defaultStartTimeoutMs = 60_000
	// startupProbePeriodSeconds: the startup probe checks often so a started app turns
	// RUNNING quickly; its failure threshold makes it give up after the start timeout.
	startupProbePeriodSeconds = 2
	// A started app is checked every 10 s and restarted after 3 failed checks in a row (about
	// 30 s: a hiccup is not a crash); it stops getting traffic sooner, after 2 failed readiness
	// checks 5 s apart.
	livenessProbePeriodSeconds     = 10
	livenessProbeFailureThreshold  = 3
	readinessProbePeriodSeconds    = 5
	readinessProbeFailureThreshold = 2
	// minCPUMillis keeps a request for apps with a tiny cpu_weight.
	minCPUMillis = 10
)

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

// EnvSecret holds the LRP's whole environment (values may carry credentials).
func EnvSecret(lrp *opi.LRP, name, namespace string, w Workload) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      names.EnvSecretName(name),
			Namespace: namespace,
			Labels:    names.LRPLabels(lrp),
		},
		Type: corev1.SecretTypeOpaque,
		Data: envSecretData(lrp, w.InstanceIndexEnv),
	}
}

// dockerConfigJSON is the content of a kubernetes.io/dockerconfigjson Secret.
type dockerConfigJSON struct {
	Auths map[string]dockerAuth `json:"auths"`
}

type dockerAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Auth     string `json:"auth"`
}

// LRPRegistrySecret holds the credentials to pull the LRP's image.
func LRPRegistrySecret(lrp *opi.LRP, name, namespace string) (*corev1.Secret, error) {
	return RegistrySecret(lrp.PrivateRegistry, lrp.Image, names.RegistrySecretName(name), namespace, names.LRPLabels(lrp))
}

// RegistrySecret is a kubernetes.io/dockerconfigjson Secret with reg's credentials for image.
func RegistrySecret(reg *opi.PrivateRegistry, image, secretName, namespace string, labels map[string]string) (*corev1.Secret, error) {
	server := reg.Server
	if server == "" {
		server = registryServer(image)
	}
	config, err := json.Marshal(dockerConfigJSON{Auths: map[string]dockerAuth{
		server: {
			Username: reg.Username,
			Password: reg.Password,
			Auth:     base64.StdEncoding.EncodeToString([]byte(reg.Username + ":" + reg.Password)),
		},
	}})
	if err != nil {
		return nil, fmt.Errorf("marshal docker config: %w", err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      secretName,
			Namespace: namespace,
			Labels:    labels,
		},
		Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: config},
	}, nil
}

// registryServer is the registry host of an image reference, or Docker Hub's key when the
// reference names none (the first path component is a host only when it has a '.' or ':' or
// is "localhost", as Docker decides).
func registryServer(image string) string {
	host, _, found := strings.Cut(image, "/")
	if !found || (!strings.ContainsAny(host, ".:") && host != "localhost") {
		return dockerHubServer
	}
	switch host {
	case "docker.io", "index.docker.io", "registry-1.docker.io":
		return dockerHubServer
	}
	return host
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

// Workload is what the operator configures for every LRP's pods (the root's Options).
type Workload struct {
	// ProbeTimeoutSeconds bounds one liveness or readiness check (and one startup check).
	ProbeTimeoutSeconds int32
	// MinReadySeconds is how long a new pod must stay Ready before a rollout counts it.
	MinReadySeconds int32
	// PodSecurity is PodSecurityBaseline or PodSecurityRestricted.
	PodSecurity string
	// InstanceIndexEnv sets CF_INSTANCE_INDEX from the pod's ordinal (StatefulSets only: a
	// Deployment's pod cannot know its index, ADR 0003).
	InstanceIndexEnv bool
}

// Deployment is the LRP's workload. Everything CC may read back is in labels, annotations or
// the spec; the env is only referenced (envSecret), never copied.
//
// Rollouts (an image update) and scale-ups surge one pod at a time and never take a pod away
// before its replacement has been Ready for MinReadySeconds (maxUnavailable 0), so a 1-instance
// app keeps serving through an update too. For "process" and "none" health checks the pod is
// Ready once its container started: MinReadySeconds is then what stops a rollout from replacing
// running instances with ones that crash at once.
func Deployment(lrp *opi.LRP, name, namespace string, w Workload) *appsv1.Deployment {
	replicas := lrp.Instances
	return &appsv1.Deployment{
		ObjectMeta: WorkloadMeta(lrp, name, namespace),
		Spec: appsv1.DeploymentSpec{
			Replicas:             &replicas,
			Selector:             &metav1.LabelSelector{MatchLabels: names.SelectorLabels(lrp.LRPIdentifier)},
			RevisionHistoryLimit: ptr.To(int32(RevisionHistoryLimit)),
			MinReadySeconds:      w.MinReadySeconds,
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       ptr.To(intstr.FromInt32(1)),
					MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				},
			},
			Template: PodTemplate(lrp, name, w),
		},
	}
}

// WorkloadMeta is the workload's name, labels and opi's annotations: everything CC may read
// back but the pod template (see workloadRecordOf), the same for every workload kind.
func WorkloadMeta(lrp *opi.LRP, name, namespace string) metav1.ObjectMeta {
	healthJSON, _ := json.Marshal(HealthCheckJSON{
		Type:           lrp.Health.Type,
		Endpoint:       lrp.Health.Endpoint,
		TimeoutMs:      lrp.Health.TimeoutMs,
		StartTimeoutMs: lrp.Health.StartTimeoutMs,
	})
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: namespace,
		Labels:    names.LRPLabels(lrp),
		Annotations: map[string]string{
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
		},
	}
}

// PodTemplate is the LRP's pod template, the same for every workload kind (but the
// CF_INSTANCE_INDEX variable, see Workload.InstanceIndexEnv).
func PodTemplate(lrp *opi.LRP, name string, w Workload) corev1.PodTemplateSpec {
	var templateAnnotations map[string]string
	if len(lrp.UserDefinedAnnotations) > 0 {
		templateAnnotations = make(map[string]string, len(lrp.UserDefinedAnnotations))
		for k, v := range lrp.UserDefinedAnnotations {
			templateAnnotations[k] = v
		}
	}

	var pullSecrets []corev1.LocalObjectReference
	if lrp.PrivateRegistry != nil {
		pullSecrets = []corev1.LocalObjectReference{{Name: names.RegistrySecretName(name)}}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      names.LRPLabels(lrp),
			Annotations: templateAnnotations,
		},
		Spec: podSpec(toContainer(lrp, name, w), pullSecrets, w.PodSecurity),
	}
}

// podSpec is the pod spec of every workload (LRP instance or task) around its one container,
// with the pod security level's context.
func podSpec(c corev1.Container, pullSecrets []corev1.LocalObjectReference, level string) corev1.PodSpec {
	return corev1.PodSpec{
		Containers:                    []corev1.Container{c},
		ImagePullSecrets:              pullSecrets,
		TerminationGracePeriodSeconds: ptr.To(int64(terminationGracePeriodSeconds)),
		AutomountServiceAccountToken:  ptr.To(false),
		// With thousands of apps in one namespace, service links would put
		// thousands of variables into every container.
		EnableServiceLinks: ptr.To(false),
		SecurityContext:    podSecurityContext(level),
	}
}

func toContainer(lrp *opi.LRP, name string, w Workload) corev1.Container {
	ports := make([]corev1.ContainerPort, 0, len(lrp.Ports))
	for _, p := range lrp.Ports {
		ports = append(ports, corev1.ContainerPort{ContainerPort: p, Protocol: corev1.ProtocolTCP})
	}
	startup, liveness, readiness := probes(lrp, w.ProbeTimeoutSeconds)
	c := corev1.Container{
		Name:           names.ContainerName,
		Image:          lrp.Image,
		Env:            containerEnv(lrp, names.EnvSecretName(name), w.InstanceIndexEnv),
		Ports:          ports,
		Resources:      resources(lrp),
		StartupProbe:   startup,
		LivenessProbe:  liveness,
		ReadinessProbe: readiness,
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             capabilities(w.PodSecurity, lrp.Ports),
		},
	}
	if len(lrp.Command) > 0 {
		c.Command = escapeCommand(lrp.Command)
	}
	return c
}

// Pod security levels an operator chooses between (Options.PodSecurity), named after the Pod
// Security Standards a namespace may enforce.
const (
	// PodSecurityBaseline runs images as they are built (root images too) with Diego's default
	// capabilities; pods pass the baseline standard.
	PodSecurityBaseline = "baseline"
	// PodSecurityRestricted runs as non-root with every capability dropped (but
	// NET_BIND_SERVICE for an app with a port below 1024); pods pass the restricted standard.
	// An image that runs as root (or names its user instead of giving a uid) then cannot start:
	// its instances are CRASHED with the kubelet's reason.
	PodSecurityRestricted = "restricted"
)

// diegoCapabilities are the capabilities Garden (Diego's container runtime, guardian's
// unprivilegedMaxCaps) gives the process of an unprivileged container, which is how every CF
// app runs on Diego: images that run as root and chown, setuid or bind port 80 keep working.
// CAP_NET_RAW is left out: the baseline Pod Security Standard does not allow adding it (a
// namespace enforcing baseline would reject the pods) and raw sockets on a shared pod network
// allow spoofing that Garden's per-container network did not.
var diegoCapabilities = []corev1.Capability{
	"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
	"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}

// capabilities drops every capability and adds back Diego's set; under the restricted level
// only binding a port below 1024, and only when the app declares such a port.
func capabilities(level string, ports []int32) *corev1.Capabilities {
	caps := &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}
	if level != PodSecurityRestricted {
		caps.Add = append([]corev1.Capability(nil), diegoCapabilities...)
		return caps
	}
	for _, p := range ports {
		if p < 1024 {
			caps.Add = []corev1.Capability{"NET_BIND_SERVICE"}
			break
		}
	}
	return caps
}

// podSecurityContext: the runtime's default seccomp profile always; non-root under restricted.
func podSecurityContext(level string) *corev1.PodSecurityContext {
	sc := &corev1.PodSecurityContext{
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	if level == PodSecurityRestricted {
		sc.RunAsNonRoot = ptr.To(true)
	}
	return sc
}

// escapeCommand doubles every '$': Kubernetes expands $(VAR) in command and reduces "$$" to
// "$", while CC's command is meant for a shell and must reach it unchanged.
func escapeCommand(cmd []string) []string {
	out := make([]string, len(cmd))
	for i, s := range cmd {
		out[i] = strings.ReplaceAll(s, "$", "$$")
	}
	return out
}

func UnescapeCommand(cmd []string) []string {
	if len(cmd) == 0 {
		return nil
	}
	out := make([]string, len(cmd))
	for i, s := range cmd {
		out[i] = strings.ReplaceAll(s, "$$", "$")
	}
	return out
}

// resources: memory request = limit; disk as an ephemeral-storage limit; a CPU request but no
// CPU limit (apps may use idle CPU, as on Diego).
//
// CPU: cpu_weight is CC's relative share (100*max(128,memory_mb)/8192, capped at 100). It maps
// to a request of cpu_weight*10 millicores, so cpu_weight 100 = one core, with a floor of 10m.
func resources(lrp *opi.LRP) corev1.ResourceRequirements {
	return resourcesFor(lrp.MemoryMB, lrp.DiskMB, lrp.CPUWeight)
}

// resourcesFor is resources for any workload (LRP or task).
func resourcesFor(memoryMB, diskMB int64, cpuWeight int32) corev1.ResourceRequirements {
	const mi = 1024 * 1024
	memory := *resource.NewQuantity(memoryMB*mi, resource.BinarySI)
	cpuMillis := max(int64(minCPUMillis), int64(cpuWeight)*10)
	req := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceMemory: memory,
			corev1.ResourceCPU:    *resource.NewMilliQuantity(cpuMillis, resource.DecimalSI),
		},
		Limits: corev1.ResourceList{
			corev1.ResourceMemory: memory.DeepCopy(),
		},
	}
	if diskMB > 0 {
		req.Limits[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(diskMB*mi, resource.BinarySI)
	}
	return req
}

// probes maps CC's health check: "port" checks a TCP connect and "http" a GET of the endpoint on
// the first port; "process" and "none" have no probe (the process running is the check; see
// Deployment for how rollouts stay safe without one).
//
// CC's health_check_timeout_ms is its start timeout (`cf push -t`; CC sends the same number as
// start_timeout_ms): it bounds the startup probe, which checks every 2 s until the app answers
// or the start timeout has passed. Each single check, startup, liveness and readiness alike, is
// bounded by probeTimeoutSeconds (Diego's per-check timeout is about a second), so a hung app is
// restarted and taken out of routing within seconds whatever its start timeout.
func probes(lrp *opi.LRP, probeTimeoutSeconds int32) (startup, liveness, readiness *corev1.Probe) {
	if len(lrp.Ports) == 0 {
		return nil, nil, nil
	}
	port := intstr.FromInt32(lrp.Ports[0])
	var handler corev1.ProbeHandler
	switch lrp.Health.Type {
	case opi.HealthCheckPort:
		handler.TCPSocket = &corev1.TCPSocketAction{Port: port}
	case opi.HealthCheckHTTP:
		path := lrp.Health.Endpoint
		if path == "" {
			path = "/"
		}
		handler.HTTPGet = &corev1.HTTPGetAction{Path: path, Port: port}
	default:
		return nil, nil, nil
	}

	timeout := max(probeTimeoutSeconds, 1)
	startTimeoutMs := cmp.Or(max(lrp.Health.StartTimeoutMs, 0), max(lrp.Health.TimeoutMs, 0), defaultStartTimeoutMs)
	startup = &corev1.Probe{
		ProbeHandler:     handler,
		TimeoutSeconds:   timeout,
		PeriodSeconds:    startupProbePeriodSeconds,
		FailureThreshold: ceilDiv(startTimeoutMs, startupProbePeriodSeconds*1000),
	}
	liveness = &corev1.Probe{
		ProbeHandler:     *handler.DeepCopy(),
		TimeoutSeconds:   timeout,
		PeriodSeconds:    livenessProbePeriodSeconds,
		FailureThreshold: livenessProbeFailureThreshold,
	}
	readiness = &corev1.Probe{
		ProbeHandler:     *handler.DeepCopy(),
		TimeoutSeconds:   timeout,
		PeriodSeconds:    readinessProbePeriodSeconds,
		FailureThreshold: readinessProbeFailureThreshold,
	}
	return startup, liveness, readiness
}

// ceilDiv is ceil(a/b) as an int32 of at least 1.
func ceilDiv(a, b int64) int32 {
	if a <= 0 {
		return 1
	}
	q := (a + b - 1) / b
	if q > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(q)
}

// Service gives the LRP's instances a stable in-cluster address, one port per LRP port.
func Service(lrp *opi.LRP, name, namespace string, owner metav1.OwnerReference) *corev1.Service {
	ports := make([]corev1.ServicePort, 0, len(lrp.Ports))
	for _, p := range lrp.Ports {
		ports = append(ports, corev1.ServicePort{
			Name:       fmt.Sprintf("port-%d", p),
			Protocol:   corev1.ProtocolTCP,
			Port:       p,
			TargetPort: intstr.FromInt32(p),
		})
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       namespace,
			Labels:          names.LRPLabels(lrp),
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: names.SelectorLabels(lrp.LRPIdentifier),
			Ports:    ports,
		},
	}
}
