package cluster

import (
	"context"
	"fmt"

	"code.cloudfoundry.org/lager/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// Pod Security Admission's namespace labels (k8s.io/pod-security-admission/api): the API server
// refuses a pod in the namespace that breaks the level of LabelPodSecurityEnforce.
const (
	LabelPodSecurityEnforce        = "pod-security.kubernetes.io/enforce"
	LabelPodSecurityEnforceVersion = "pod-security.kubernetes.io/enforce-version"
)

// NamespaceOptions say what EnsureNamespace may do.
type NamespaceOptions struct {
	// Create lets it create a missing namespace.
	Create bool
	// PodSecurity is the apps' level (objects.PodSecurityBaseline or objects.PodSecurityRestricted): a namespace
	// opi creates enforces it, and an existing one that does not is warned about.
	PodSecurity string
}

// EnsureNamespace checks that namespace name exists; when it is missing and opts.Create is set,
// it creates it, enforcing opts.PodSecurity (Pod Security Admission, at the latest version):
// then nothing but opi's own pod specs, of that level, runs there, whatever a tenant's request
// managed to put into one. A missing namespace without Create, or no permission to read it, is
// an error saying so. An existing namespace that does not enforce opts.PodSecurity is logged as
// a warning (namespace-pod-security): opi's Role may not change namespaces.
func EnsureNamespace(ctx context.Context, client kubernetes.Interface, name string, opts NamespaceOptions, logger lager.Logger) error {
	existing, err := client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	switch kind := kube.Classify(err); {
	case err == nil:
		warnPodSecurity(logger, existing, opts.PodSecurity)
		return nil
	case kind == kube.KindForbidden:
		return fmt.Errorf("check namespace %q: not allowed to read it (grant get on namespaces or create it beforehand): %w", name, err)
	case kind != kube.KindNotFound:
		return kube.APIError(err, fmt.Sprintf("check namespace %q", name))
	case !opts.Create:
		return fmt.Errorf("namespace %q does not exist (create it, or let opi create it): %w", name, opi.ErrNotFound)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{names.LabelManagedBy: names.ManagedByOPI},
	}}
	if opts.PodSecurity != "" {
		ns.Labels[LabelPodSecurityEnforce] = opts.PodSecurity
		ns.Labels[LabelPodSecurityEnforceVersion] = "latest"
	}
	created, _, err := kube.CreateIfAbsent(ctx, client.CoreV1().Namespaces(), ns)
	if err != nil {
		if kube.Classify(err) == kube.KindForbidden {
			return fmt.Errorf("create namespace %q: not allowed: %w", name, err)
		}
		return kube.APIError(err, fmt.Sprintf("create namespace %q", name))
	}
	warnPodSecurity(logger, created, opts.PodSecurity)
	return nil
}

// podSecurityRank orders Pod Security Standards levels, from the most permissive.
var podSecurityRank = map[string]int{"privileged": 0, objects.PodSecurityBaseline: 1, objects.PodSecurityRestricted: 2}

// warnPodSecurity logs when ns does not enforce level: a weaker (or no) enforcement lets pod
// specs through that the level forbids; a stricter one refuses opi's own pods.
func warnPodSecurity(logger lager.Logger, ns *corev1.Namespace, level string) {
	if ns == nil || level == "" {
		return
	}
	enforced, ok := ns.Labels[LabelPodSecurityEnforce]
	data := lager.Data{"namespace": ns.Name, "pod-security": level, "label": LabelPodSecurityEnforce,
		"fix": fmt.Sprintf("kubectl label namespace %s %s=%s %s=latest --overwrite", ns.Name, LabelPodSecurityEnforce, level, LabelPodSecurityEnforceVersion)}
	switch rank, known := podSecurityRank[enforced]; {
	case !ok:
		data["note"] = "the namespace enforces no Pod Security Standard: the API server accepts any pod spec there (privileged containers, host namespaces), nothing backs opi's own checks"
	case !known || rank < podSecurityRank[level]:
		data["enforced"] = enforced
		data["note"] = "the namespace enforces a weaker Pod Security Standard than pod_security: the API server accepts pod specs there that the level forbids"
	case rank > podSecurityRank[level]:
		data["enforced"] = enforced
		data["note"] = "the namespace enforces a stricter Pod Security Standard than pod_security: the API server refuses the apps' pods (set pod_security to match)"
	default:
		return
	}
	logger.Info("namespace-pod-security", data)
}
