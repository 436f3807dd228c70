// Package clientset makes a Reader's Sources from a typed clientset (opi's own, or a fake one in
// specs).
package clientset

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/instances"
)

// Sources are namespace's objects through client.
func Sources(client kubernetes.Interface, namespace string) instances.Sources {
	lw := func(list func(context.Context, metav1.ListOptions) (runtime.Object, error), watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.ListerWatcher {
		// As client-go's informers: told whether client streams lists (a fake one does not).
		return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{ListWithContextFunc: list, WatchFuncWithContext: watchFn}, client)
	}
	return instances.Sources{
		Deployments: lw(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.AppsV1().Deployments(namespace).List(ctx, o)
		}, client.AppsV1().Deployments(namespace).Watch),
		StatefulSets: lw(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.AppsV1().StatefulSets(namespace).List(ctx, o)
		}, client.AppsV1().StatefulSets(namespace).Watch),
		Pods: lw(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Pods(namespace).List(ctx, o)
		}, client.CoreV1().Pods(namespace).Watch),
		Jobs: lw(func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.BatchV1().Jobs(namespace).List(ctx, o)
		}, client.BatchV1().Jobs(namespace).Watch),
	}
}
