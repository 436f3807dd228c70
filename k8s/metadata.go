package k8s

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/opi-bridge/opi/k8s/hooks"
)

// The resources the janitor lists, metadata only (see metadataLists).
var (
	secretsResource           = corev1.SchemeGroupVersion.WithResource("secrets")
	servicesResource          = hooks.ServicesResource
	ingressesResource         = hooks.IngressesResource
	networkPoliciesResource   = hooks.NetworkPoliciesResource
	disruptionBudgetsResource = hooks.DisruptionBudgetsResource
	httpRoutesResource        = hooks.HTTPRoutesResource
)

// metadataList and metadataLists are the hooks' metadata LISTs (hooks.MetadataLists), which
// the janitor lists with too.
type (
	metadataList  = hooks.MetadataList
	metadataLists = hooks.MetadataLists
)

// newMetadataLists lists through md (a client made with metadata.NewForConfig); without one it
// falls back to the typed clients (clientsetMetadata).
func newMetadataLists(md metadata.Interface, client kubernetes.Interface, gw gateway.Interface, namespace string) metadataLists {
	if md == nil {
		return clientsetMetadata{client: client, gateway: gw, namespace: namespace}.lister
	}
	return func(resource schema.GroupVersionResource) metadataList {
		return md.Resource(resource).Namespace(namespace).List
	}
}

// clientsetMetadata serves the janitor's metadata LISTs with the typed clients, for a backend
// made without a metadata client (Options.Metadata; tests on a fake clientset): the whole
// objects are listed and only their metadata is kept. The outcome is the same, the memory
// saving is not.
type clientsetMetadata struct {
	client    kubernetes.Interface
	gateway   gateway.Interface
	namespace string
}

func (c clientsetMetadata) lister(resource schema.GroupVersionResource) metadataList {
	return func(ctx context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
		var list runtime.Object
		var err error
		switch resource {
		case secretsResource:
			list, err = c.client.CoreV1().Secrets(c.namespace).List(ctx, opts)
		case servicesResource:
			list, err = c.client.CoreV1().Services(c.namespace).List(ctx, opts)
		case ingressesResource:
			list, err = c.client.NetworkingV1().Ingresses(c.namespace).List(ctx, opts)
		case networkPoliciesResource:
			list, err = c.client.NetworkingV1().NetworkPolicies(c.namespace).List(ctx, opts)
		case disruptionBudgetsResource:
			list, err = c.client.PolicyV1().PodDisruptionBudgets(c.namespace).List(ctx, opts)
		case httpRoutesResource:
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
