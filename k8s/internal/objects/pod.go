package objects

import (
	"cmp"
	"maps"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// The pod every workload runs (LRP instance or task): its template, its one container, the
// probes, resources and security settings.

const (
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

// podTemplate is the LRP's pod template, the same for every workload kind (but the
// CF_INSTANCE_INDEX variable, see Workload.InstanceIndexEnv); env is the container's variables
// (envFor).
func podTemplate(lrp *opi.LRP, id Identity, env []corev1.EnvVar, w Workload) corev1.PodTemplateSpec {
	var templateAnnotations map[string]string
	if len(lrp.UserDefinedAnnotations) > 0 {
		templateAnnotations = make(map[string]string, len(lrp.UserDefinedAnnotations))
		for k, v := range lrp.UserDefinedAnnotations {
			templateAnnotations[k] = v
		}
	}

	var pullSecrets []corev1.LocalObjectReference
	if lrp.PrivateRegistry != nil {
		pullSecrets = []corev1.LocalObjectReference{{Name: id.RegistrySecretName}}
	}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      maps.Clone(id.Labels),
			Annotations: templateAnnotations,
		},
		Spec: podSpec(container(lrp, env, w), pullSecrets, w.PodSecurity),
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

// container is the LRP's app container, reading its variables env.
func container(lrp *opi.LRP, env []corev1.EnvVar, w Workload) corev1.Container {
	ports := make([]corev1.ContainerPort, 0, len(lrp.Ports))
	for _, p := range lrp.Ports {
		ports = append(ports, corev1.ContainerPort{ContainerPort: p, Protocol: corev1.ProtocolTCP})
	}
	startup, liveness, readiness := probes(lrp, w.ProbeTimeoutSeconds)
	c := corev1.Container{
		Name:           names.ContainerName,
		Image:          lrp.Image,
		Env:            env,
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

// UnescapeCommand is escapeCommand undone: the command as CC sent it, for reads.
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
// the Deployment kind, k8s/internal/workload, for how rollouts stay safe without one).
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
