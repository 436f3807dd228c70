package hooks

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The resources the hooks' Missing list, metadata only (the janitor lists them too).
var (
	ServicesResource          = corev1.SchemeGroupVersion.WithResource("services")
	IngressesResource         = networkingv1.SchemeGroupVersion.WithResource("ingresses")
	NetworkPoliciesResource   = networkingv1.SchemeGroupVersion.WithResource("networkpolicies")
	DisruptionBudgetsResource = policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")
	HTTPRoutesResource        = gatewayv1.SchemeGroupVersion.WithResource("httproutes")
)

// MetadataList is a LIST of one resource in the backend's namespace that returns the objects'
// metadata only (PartialObjectMetadata), what kube.ListPages and kube.ListNames page through.
type MetadataList func(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error)

// MetadataLists gives the metadata LIST of a resource in the backend's namespace.
//
// The janitor lists with these: all it reads of its objects is metadata (names, labels, owner
// references, creation and deletion times, uid, resource version). A metadata LIST makes the
// API server send only that, so the Secrets' values (app env, registry credentials) never pass
// through opi, and a page of thousands of Services or Secrets is a fraction of the bytes to
// decode and hold. Writes (deletes, owner patches) stay on the typed clientset.
type MetadataLists func(resource schema.GroupVersionResource) MetadataList
