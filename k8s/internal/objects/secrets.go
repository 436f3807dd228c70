package objects

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/opi-bridge/opi/opi"
)

// The Secrets of LRPs and tasks: the env Secret, with the keys its variables get and the
// container's variables that read them (one mapping, computed once per object), and the
// registry Secret.

// lrpSecrets are the LRP's Secrets, the env Secret and then, with registry credentials, the
// registry Secret, and the container's variables that read the env Secret; index sets
// CF_INSTANCE_INDEX from the pod's ordinal (StatefulSets).
func lrpSecrets(lrp *opi.LRP, id Identity, index bool) ([]*corev1.Secret, []corev1.EnvVar, error) {
	data, env := envFor(lrp.Env, lrp.Ports, id.EnvSecretName, index)
	secrets := []*corev1.Secret{{
		ObjectMeta: metav1.ObjectMeta{Name: id.EnvSecretName, Namespace: id.Namespace, Labels: maps.Clone(id.Labels)},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}}
	if lrp.PrivateRegistry != nil {
		registry, err := RegistrySecret(lrp.PrivateRegistry, lrp.Image, id.RegistrySecretName, id.Namespace, maps.Clone(id.Labels))
		if err != nil {
			return nil, nil, err
		}
		secrets = append(secrets, registry)
	}
	return secrets, env, nil
}

// dockerHubServer is the registry key Docker (and the kubelet) use for Docker Hub.
const dockerHubServer = "https://index.docker.io/v1/"

// dockerConfigJSON is the content of a kubernetes.io/dockerconfigjson Secret.
type dockerConfigJSON struct {
	Auths map[string]dockerAuth `json:"auths"`
}

type dockerAuth struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Auth     string `json:"auth"`
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

// envFor is an env Secret's data and the container variables that read it: one secretKeyRef
// per app variable, by name and in name order, then the platform's variables (which override
// the app's of the same name, so those never reach the Secret). Values read from a Secret are
// never $(VAR)-expanded by Kubernetes, so app values reach the app unchanged.
func envFor(values map[string]string, ports []int32, secretName string, index bool) (map[string][]byte, []corev1.EnvVar) {
	platform := PlatformEnv(ports, index)
	overridden := make(map[string]bool, len(platform))
	for _, e := range platform {
		overridden[e.Name] = true
	}
	names := make([]string, 0, len(values))
	for name := range values {
		if !overridden[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)

	data := make(map[string][]byte, len(names))
	env := make([]corev1.EnvVar, 0, len(names)+6)
	for _, name := range names {
		key := envKey(name)
		data[key] = []byte(values[name])
		env = append(env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
			SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: secretName},
				Key:                  key,
			},
		}})
	}
	return data, append(env, platform...)
}
