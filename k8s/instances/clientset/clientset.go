// Package clientset makes a Reader's Sources from a typed clientset (opi's own, or a fake one in
// specs).
package clientset

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/instances"
)

// Sources are namespace's objects through client.
func Sources(client kubernetes.Interface, namespace string) instances.Sources {
	return instances.Sources{
		Deployments:  listWatch[*appsv1.DeploymentList](client, client.AppsV1().Deployments(namespace)),
		StatefulSets: listWatch[*appsv1.StatefulSetList](client, client.AppsV1().StatefulSets(namespace)),
		Pods:         listWatch[*corev1.PodList](client, client.CoreV1().Pods(namespace)),
		Jobs:         listWatch[*batchv1.JobList](client, client.BatchV1().Jobs(namespace)),
	}
}

// typed is the list and watch of one resource's typed client, whose lists are of type L.
type typed[L runtime.Object] interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
}

func listWatch[L runtime.Object](client kubernetes.Interface, c typed[L]) cache.ListerWatcher {
	// As client-go's informers: told whether client streams lists (a fake one does not).
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) },
		WatchFuncWithContext: c.Watch,
	}, client)
}
