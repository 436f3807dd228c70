package hooks

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// The resources the hooks' Missing list, metadata only (the janitor lists them too, and the
// LRP's Secrets).
var (
	SecretsResource           = corev1.SchemeGroupVersion.WithResource("secrets")
	ServicesResource          = corev1.SchemeGroupVersion.WithResource("services")
	IngressesResource         = networkingv1.SchemeGroupVersion.WithResource("ingresses")
	NetworkPoliciesResource   = networkingv1.SchemeGroupVersion.WithResource("networkpolicies")
	DisruptionBudgetsResource = policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets")
	HTTPRoutesResource        = gatewayv1.SchemeGroupVersion.WithResource("httproutes")
)

// MetadataList is a LIST of one resource in the backend's namespace that returns the objects'
// metadata only (PartialObjectMetadata), what apiclient.ListPages and apiclient.ListNames page through.
type MetadataList func(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error)

// MetadataLists gives the metadata LIST of a resource in the backend's namespace.
//
// The janitor lists with these: all it reads of its objects is metadata (names, labels, owner
// references, creation and deletion times, uid, resource version). A metadata LIST makes the
// API server send only that, so the Secrets' values (app env, registry credentials) never pass
// through opi, and a page of thousands of Services or Secrets is a fraction of the bytes to
// decode and hold. Writes (deletes, owner patches) stay on the typed clientset.
type MetadataLists func(resource schema.GroupVersionResource) MetadataList

// NewMetadataLists lists through md (a client made with metadata.NewForConfig); without one it
// falls back to the typed clients (clientsetMetadata).
func NewMetadataLists(md metadata.Interface, client kubernetes.Interface, gw gateway.Interface, namespace string) MetadataLists {
	if md == nil {
		return clientsetMetadata{client: client, gateway: gw, namespace: namespace}.lister
	}
	return func(resource schema.GroupVersionResource) MetadataList {
		return md.Resource(resource).Namespace(namespace).List
	}
}

// clientsetMetadata serves the metadata LISTs with the typed clients, for a backend made
// without a metadata client (the root's Options.Metadata; tests on a fake clientset): the whole
// objects are listed and only their metadata is kept. The outcome is the same, the memory
// saving is not.
type clientsetMetadata struct {
	client    kubernetes.Interface
	gateway   gateway.Interface
	namespace string
}

func (c clientsetMetadata) lister(resource schema.GroupVersionResource) MetadataList {
	return func(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
		var list runtime.Object
		var err error
		switch resource {
		case SecretsResource:
			list, err = c.client.CoreV1().Secrets(c.namespace).List(ctx, opts)
		case ServicesResource:
			list, err = c.client.CoreV1().Services(c.namespace).List(ctx, opts)
		case IngressesResource:
			list, err = c.client.NetworkingV1().Ingresses(c.namespace).List(ctx, opts)
		case NetworkPoliciesResource:
			list, err = c.client.NetworkingV1().NetworkPolicies(c.namespace).List(ctx, opts)
		case DisruptionBudgetsResource:
			list, err = c.client.PolicyV1().PodDisruptionBudgets(c.namespace).List(ctx, opts)
		case HTTPRoutesResource:
			if c.gateway == nil {
				return nil, fmt.Errorf("list %s: no gateway api client", resource.Resource)
			}
			list, err = c.gateway.GatewayV1().HTTPRoutes(c.namespace).List(ctx, opts)
		default:
			return nil, fmt.Errorf("list %s: no typed client for it", resource)
		}
		if err != nil {
			return nil, err
		}
		return metadataOf(list)
	}
}

// metadataOf is the metadata of a typed list and of its items.
func metadataOf(list runtime.Object) (*metav1.PartialObjectMetadataList, error) {
	listMeta, err := meta.ListAccessor(list)
	if err != nil {
		return nil, fmt.Errorf("list metadata: %w", err)
	}
	out := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{
		ResourceVersion: listMeta.GetResourceVersion(),
		Continue:        listMeta.GetContinue(),
	}}
	err = meta.EachListItem(list, func(obj runtime.Object) error {
		o, ok := obj.(metav1.ObjectMetaAccessor)
		if !ok {
			return fmt.Errorf("%T has no object metadata", obj)
		}
		m, ok := o.GetObjectMeta().(*metav1.ObjectMeta)
		if !ok {
			return fmt.Errorf("%T has no object metadata", obj)
		}
		out.Items = append(out.Items, metav1.PartialObjectMetadata{ObjectMeta: *m})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
