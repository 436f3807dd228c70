// Package restsources makes a Reader's Sources from REST clients of the three API groups it
// reads (core/v1, apps/v1, batch/v1) on a scheme of those groups only: a program that needs no
// more (the node agent) links neither the typed clientset nor the scheme of every API group.
package restsources

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/instances"
)

// New are namespace's objects through REST clients made from cfg (its content type and user
// agent kept).
func New(cfg *rest.Config, namespace string) (instances.Sources, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return instances.Sources{}, fmt.Errorf("scheme: %w", err)
		}
	}
	codecs := serializer.NewCodecFactory(scheme)
	client := func(gv schema.GroupVersion) (*rest.RESTClient, error) {
		c := rest.CopyConfig(cfg)
		c.GroupVersion = &gv
		c.APIPath = "/apis"
		if gv.Group == "" {
			c.APIPath = "/api"
		}
		c.NegotiatedSerializer = codecs.WithoutConversion()
		if c.UserAgent == "" {
			c.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		return rest.RESTClientFor(c)
	}
	core, err := client(corev1.SchemeGroupVersion)
	if err != nil {
		return instances.Sources{}, err
	}
	apps, err := client(appsv1.SchemeGroupVersion)
	if err != nil {
		return instances.Sources{}, err
	}
	batch, err := client(batchv1.SchemeGroupVersion)
	if err != nil {
		return instances.Sources{}, err
	}
	lw := func(c cache.Getter, resource string) cache.ListerWatcher {
		return cache.NewFilteredListWatchFromClient(c, resource, namespace, func(*metav1.ListOptions) {})
	}
	return instances.Sources{
		Deployments: lw(apps, "deployments"), StatefulSets: lw(apps, "statefulsets"),
		Pods: lw(core, "pods"), Jobs: lw(batch, "jobs"),
	}, nil
}
