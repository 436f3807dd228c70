package objects

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/opi-bridge/opi/opi"
)

// Env names Kubernetes accepts (any printable ASCII but '=') are wider than Secret keys
// ([-._a-zA-Z0-9]+, at most 253, not "." or ".." or "..*"), and CF apps do use names with ':'
// or '.'. Each env name therefore maps to a Secret key, deterministically and without
// collisions:
//   - a name that is a valid Secret key and does not start with a reserved prefix is its own key;
//   - any other name becomes "x." + the unpadded lower-case base32 of its bytes, or, when that
//     would exceed 253 chars, "h." + the hex sha256 of the name.
//
// Keys of the first kind never start with "x." or "h.", keys of the other two always do, and
// base32 is injective, so two names never share a key.
const (
	encodedKeyPrefix = "x."
	hashedKeyPrefix  = "h."
)

var keyEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// envKey is the Secret key that holds env variable name.
func envKey(name string) string {
	if len(validation.IsConfigMapKey(name)) == 0 &&
		!strings.HasPrefix(name, encodedKeyPrefix) && !strings.HasPrefix(name, hashedKeyPrefix) {
		return name
	}
	encoded := encodedKeyPrefix + strings.ToLower(keyEncoding.EncodeToString([]byte(name)))
	if len(encoded) <= validation.DNS1123SubdomainMaxLength {
		return encoded
	}
	sum := sha256.Sum256([]byte(name))
	return hashedKeyPrefix + hex.EncodeToString(sum[:])
}

// Variables the platform sets on every instance, overriding the app's own of the same name.
const (
	envInstanceGUID       = "CF_INSTANCE_GUID"
	envInstanceIP         = "CF_INSTANCE_IP"
	envInstanceInternalIP = "CF_INSTANCE_INTERNAL_IP"
	envInstancePort       = "CF_INSTANCE_PORT"
	envInstanceAddr       = "CF_INSTANCE_ADDR"
	envInstancePorts      = "CF_INSTANCE_PORTS"
	envInstanceIndex      = "CF_INSTANCE_INDEX"
)

// PlatformEnv are the CF_INSTANCE_* variables. The downward-API ones come first: Kubernetes
// expands $(VAR) in a value only for variables defined earlier in the list.
//
// With index (StatefulSets), CF_INSTANCE_INDEX is the pod's ordinal, from the pod-index label
// the StatefulSet controller puts on each pod: it is the index GetInstances reports.
func PlatformEnv(ports []int32, index bool) []corev1.EnvVar {
	fieldRef := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path},
		}}
	}
	env := []corev1.EnvVar{
		fieldRef(envInstanceGUID, "metadata.uid"),
		fieldRef(envInstanceIP, "status.hostIP"),
		fieldRef(envInstanceInternalIP, "status.podIP"),
	}
	if index {
		env = append(env, fieldRef(envInstanceIndex, "metadata.labels['"+appsv1.PodIndexLabel+"']"))
	}
	if len(ports) == 0 {
		return env
	}
	type portMapping struct {
		External int32 `json:"external"`
		Internal int32 `json:"internal"`
	}
	mappings := make([]portMapping, 0, len(ports))
	for _, p := range ports {
		mappings = append(mappings, portMapping{External: p, Internal: p})
	}
	portsJSON, _ := json.Marshal(mappings) // a slice of ints always marshals
	first := strconv.Itoa(int(ports[0]))
	return append(env,
		corev1.EnvVar{Name: envInstancePort, Value: first},
		corev1.EnvVar{Name: envInstanceAddr, Value: "$(" + envInstanceInternalIP + "):" + first},
		corev1.EnvVar{Name: envInstancePorts, Value: string(portsJSON)},
	)
}

// envNames are the names of env that reach the Secret of a workload with ports (and with
// index, CF_INSTANCE_INDEX), sorted.
func envNames(env map[string]string, ports []int32, index bool) []string {
	platform := map[string]bool{}
	for _, e := range PlatformEnv(ports, index) {
		platform[e.Name] = true
	}
	names := make([]string, 0, len(env))
	for name := range env {
		if !platform[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// containerEnv is the container's env: one secretKeyRef per app variable, by name, then the
// platform's variables. Values read from a Secret are never $(VAR)-expanded by Kubernetes, so
// app values reach the app unchanged.
func containerEnv(lrp *opi.LRP, secretName string, index bool) []corev1.EnvVar {
	return containerEnvFor(lrp.Env, lrp.Ports, secretName, index)
}

// containerEnvFor is containerEnv for any workload (LRP or task).
func containerEnvFor(appEnv map[string]string, ports []int32, secretName string, index bool) []corev1.EnvVar {
	names := envNames(appEnv, ports, index)
	env := make([]corev1.EnvVar, 0, len(names)+6)
	for _, name := range names {
		env = append(env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: secretName},
				Key:                  envKey(name),
			},
		}})
	}
	return append(env, PlatformEnv(ports, index)...)
}

// envSecretData is the content of the env Secret.
func envSecretData(lrp *opi.LRP, index bool) map[string][]byte {
	return envSecretDataFor(lrp.Env, lrp.Ports, index)
}

// envSecretDataFor is envSecretData for any workload (LRP or task).
func envSecretDataFor(env map[string]string, ports []int32, index bool) map[string][]byte {
	names := envNames(env, ports, index)
	data := make(map[string][]byte, len(names))
	for _, name := range names {
		data[envKey(name)] = []byte(env[name])
	}
	return data
}
