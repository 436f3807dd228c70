package names

import (
	"crypto/sha256"
	"encoding/hex"
	corev1 "k8s.io/api/core/v1"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/opi-bridge/opi/opi"
)

// AnnotationPrefix starts every annotation opi writes on its own objects.
const AnnotationPrefix = "opi-bridge.io/"

// ReservedAnnotationPrefix is AnnotationPrefix, for the configuration: no user annotation may
// carry it (opi's bookkeeping on pods, opi-bridge.io/crashes-reported, uses it).
const ReservedAnnotationPrefix = AnnotationPrefix

// Labels opi puts on every object it makes for an LRP (Deployment, its pod template, Secrets,
// Service). guid and version are separate labels because a process guid (73 chars) does not
// fit a label value (63).
const (
	LabelGUID        = "opi-bridge.io/guid"
	LabelVersion     = "opi-bridge.io/version"
	LabelAppGUID     = "opi-bridge.io/app-guid"
	LabelProcessType = "opi-bridge.io/process-type"
	LabelSourceType  = "opi-bridge.io/source-type"
	LabelManagedBy   = "app.kubernetes.io/managed-by"

	// SourceTypeApp marks LRPs (as opposed to tasks or staging); the informers select on it.
	SourceTypeApp = "APP"
	// ManagedByOPI is the value of LabelManagedBy.
	ManagedByOPI = "opi"
)

// Annotations on the Deployment. They carry what reads report back and what does not fit a
// label; never env values or registry credentials.
const (
	AnnotationProcessGUID = AnnotationPrefix + "process-guid"
	// AnnotationLastUpdated holds CC's last_updated / update.annotation byte for byte.
	AnnotationLastUpdated = "opi-bridge.io/last-updated"
	AnnotationProcessType = "opi-bridge.io/process-type"
	AnnotationAppName     = "opi-bridge.io/app-name"
	AnnotationSpaceName   = "opi-bridge.io/space-name"
	AnnotationSpaceGUID   = "opi-bridge.io/space-guid"
	AnnotationOrgName     = "opi-bridge.io/org-name"
	AnnotationOrgGUID     = "opi-bridge.io/org-guid"
	// AnnotationRoutes is JSON: [{"hostname":"...","port":8080}].
	AnnotationRoutes = "opi-bridge.io/routes"
	// AnnotationHealthCheck is JSON of the LRP's health check, for reads.
	AnnotationHealthCheck = "opi-bridge.io/health-check"
)

const (
	// ContainerName is the name of the app's container in every pod.
	ContainerName = "opi"
	// RelayContainerName is the name of the ephemeral container the SSH proxy adds to an
	// instance's pod for tunnels to other hosts; the node agent ships none of its output.
	RelayContainerName = "opi-relay"

	// maxNameLen leaves room in a 63-char name for the ReplicaSet hash (11) and pod suffix (6).
	maxNameLen = 45
	hashLen    = 10
	// maxPrefixLen is what remains of maxNameLen for the readable part, after "-" + hash.
	maxPrefixLen = maxNameLen - hashLen - 1
)

// DeploymentName is the deterministic name of the LRP's workload, Deployment or StatefulSet
// (and of its Service and budget; the Secrets add suffixes): a readable
// prefix from the app and space names, then the first 10 hex digits of the sha256 of the
// process guid, so a repeated desire of the same LRP hits "already exists". The result is a
// DNS-1035 label of at most 45 chars.
func DeploymentName(lrp *opi.LRP) string {
	prefix := sanitizeName(lrp.AppName + "-" + lrp.SpaceName)
	if prefix == "" {
		prefix = "app"
	} else if prefix[0] >= '0' && prefix[0] <= '9' {
		prefix = "app-" + prefix
	}
	if len(prefix) > maxPrefixLen {
		prefix = strings.TrimRight(prefix[:maxPrefixLen], "-")
	}
	sum := sha256.Sum256([]byte(lrp.ProcessGUID()))
	return prefix + "-" + hex.EncodeToString(sum[:])[:hashLen]
}

// sanitizeName lower-cases s, replaces every char outside [a-z0-9-] with '-', collapses runs
// of '-' and trims them from both ends.
func sanitizeName(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-")
}

// Suffixes of the Secrets' names after their workload's (or Job's) name.
const (
	EnvSecretSuffix      = "-env"
	RegistrySecretSuffix = "-registry"
)

// EnvSecretName is the name of the env Secret of the workload or Job name.
func EnvSecretName(name string) string { return name + EnvSecretSuffix }

// RegistrySecretName is the name of the registry Secret of the workload or Job name.
func RegistrySecretName(name string) string { return name + RegistrySecretSuffix }

// LabelValue returns v when it is a valid label value, else a sanitised form of it (the exact
// value is kept in an annotation where it matters).
func LabelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	var b strings.Builder
	for _, r := range v {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '-' || r == '_' || r == '.' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	s := b.String()
	if len(s) > validation.LabelValueMaxLength {
		s = s[:validation.LabelValueMaxLength]
	}
	return strings.TrimFunc(s, func(r rune) bool {
		return !((r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	})
}

// LRPIdentity is what the names of an LRP's objects derive from the LRP, once per desire:
// the workload's name, the labels of every object and the selector of the pods.
type LRPIdentity struct {
	// Name is DeploymentName: the workload's, the Service's, the budget's.
	Name string
	// Labels are LRPLabels.
	Labels map[string]string
	// Selector is SelectorLabels.
	Selector map[string]string
}

// IdentityOf is lrp's LRPIdentity.
func IdentityOf(lrp *opi.LRP) LRPIdentity {
	return LRPIdentity{Name: DeploymentName(lrp), Labels: LRPLabels(lrp), Selector: SelectorLabels(lrp.LRPIdentifier)}
}

// LRPLabels are the labels of every object of the LRP.
func LRPLabels(lrp *opi.LRP) map[string]string {
	return map[string]string{
		LabelGUID:        lrp.GUID,
		LabelVersion:     lrp.Version,
		LabelAppGUID:     LabelValue(lrp.AppGUID),
		LabelProcessType: LabelValue(lrp.ProcessType),
		LabelSourceType:  SourceTypeApp,
		LabelManagedBy:   ManagedByOPI,
	}
}

// SelectorLabels select the LRP's pods (Deployment selector, Service selector).
func SelectorLabels(id opi.LRPIdentifier) map[string]string {
	return map[string]string{LabelGUID: id.GUID, LabelVersion: id.Version}
}

// LRPSelector is a label selector matching every object opi made for the LRP.
func LRPSelector(id opi.LRPIdentifier) string {
	return labels.Set{
		LabelGUID:       id.GUID,
		LabelVersion:    id.Version,
		LabelSourceType: SourceTypeApp,
	}.String()
}

// AppContainer is the app's container in a pod spec, nil when absent.
func AppContainer(spec *corev1.PodSpec) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == ContainerName {
			return &spec.Containers[i]
		}
	}
	return nil
}

// AnnotationEgressRules is JSON of the LRP's egress rules, on its Deployment: the janitor
// rebuilds a missing egress policy from it. Rules are destinations and ports, not secrets.
const AnnotationEgressRules = AnnotationPrefix + "egress-rules"
