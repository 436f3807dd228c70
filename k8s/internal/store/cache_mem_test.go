package store_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"code.cloudfoundry.org/lager/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/internal/workload"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// BenchmarkCacheBytesPerApp reports the Go heap the informer caches hold per app (one
// Deployment and one running pod, as the API server would send them) once synced: the
// part of opi's memory that grows with the apps. Run with -benchtime=1x.
func BenchmarkCacheBytesPerApp(b *testing.B) {
	const apps = 2000
	for range b.N {
		client := fake.NewClientset()
		for i := range apps {
			d, p := memSampleObjects(i)
			if err := client.Tracker().Create(appsv1.SchemeGroupVersion.WithResource("deployments"), d, memNamespace); err != nil {
				b.Fatal(err)
			}
			if err := client.Tracker().Create(corev1.SchemeGroupVersion.WithResource("pods"), p, memNamespace); err != nil {
				b.Fatal(err)
			}
		}
		before := heapAlloc()

		ctx, cancel := context.WithCancel(context.Background())
		backend := backendtest.MustBackend(client, lager.NewLogger("mem"), k8s.Options{Namespace: memNamespace, Store: store.Options{ReadWaitTimeout: time.Second}})
		if err := backend.Start(ctx); err != nil {
			b.Fatal(err)
		}
		lrps, err := backend.ListLRPs(ctx)
		if err != nil || len(lrps) != apps {
			b.Fatalf("%d lrps, %v", len(lrps), err)
		}
		after := heapAlloc()
		if path := os.Getenv("OPI_HEAP_PROFILE"); path != "" {
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.WriteHeapProfile(f); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		b.ReportMetric(float64(after-before)/apps, "B/app")
		runtime.KeepAlive(backend)
		cancel()
	}
}

const memNamespace = "cf-apps"

func heapAlloc() int64 {
	var m runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// memSampleObjects is app i's Deployment and one pod of it with what the API server adds
// (managed fields, status, the controller's labels and owner).
func memSampleObjects(i int) (*appsv1.Deployment, *corev1.Pod) {
	lrp := &opi.LRP{
		LRPIdentifier:    opi.LRPIdentifier{GUID: fmt.Sprintf("%08d-0d35-4ad7-a6d3-2c0ef0d3bb2a", i), Version: fmt.Sprintf("%08d-8b8e-4c1c-9d4b-6a3a2b1c0d9e", i)},
		ProcessType:      "web",
		AppGUID:          fmt.Sprintf("%08d-1111-2222-3333-444455556666", i),
		AppName:          fmt.Sprintf("app-%d", i),
		SpaceGUID:        "5b0f3a52-9a1e-4f0e-8f43-2f8e6b1c9d7a",
		SpaceName:        "dev",
		OrganizationGUID: "0c6e1b9a-3d2f-4a8b-9e7c-1f2a3b4c5d6e",
		OrganizationName: "acme",
		Image:            "registry.example.com/team/app:1.0",
		Command:          []string{"/bin/sh", "-c", "exec ./app"},
		Env:              map[string]string{"FOO": "foo", "VCAP_APPLICATION": `{"application_name":"app"}`},
		Ports:            []int32{8080},
		Health:           opi.HealthCheck{Type: opi.HealthCheckPort, TimeoutMs: 1000},
		MemoryMB:         256,
		DiskMB:           1024,
		CPUWeight:        10,
		Instances:        1,
		Routes:           []opi.Route{{Hostname: fmt.Sprintf("app-%d.example.com", i), Port: 8080}},
		LastUpdated:      "1600000000.2499998",
	}
	name := names.DeploymentName(lrp)
	desire, err := objects.ForDesire(lrp, memNamespace, objects.Workload{})
	if err != nil {
		panic(err)
	}
	d := workload.New(workload.Deployments, workload.Config{Namespace: memNamespace}).Build(&desire).Obj.(*appsv1.Deployment)
	d.UID = types.UID(fmt.Sprintf("%08d-aaaa-bbbb-cccc-dddddddddddd", i))
	d.ResourceVersion = fmt.Sprint(1000 + i)
	managed := metav1.ManagedFieldsEntry{
		Manager: "opi", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1",
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: make([]byte, 1500)},
	}
	d.ManagedFields = []metav1.ManagedFieldsEntry{managed}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}

	now := metav1.Now()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-5d8f7c9b4-x2x7q", Namespace: memNamespace,
			UID:             types.UID(fmt.Sprintf("%08d-eeee-ffff-0000-111111111111", i)),
			ResourceVersion: fmt.Sprint(5000 + i), CreationTimestamp: now,
			Labels:          map[string]string{"pod-template-hash": "5d8f7c9b4"},
			Annotations:     d.Spec.Template.Annotations,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name + "-5d8f7c9b4", UID: "rs"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{managed, managed},
		},
		Spec: *d.Spec.Template.Spec.DeepCopy(),
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "10.0.0.1", PodIP: "10.244.0.1", StartTime: &now,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: names.ContainerName, Ready: true, Image: lrp.Image, ImageID: "docker-pullable://x@sha256:abc",
				ContainerID: "containerd://0123456789abcdef", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			}},
		},
	}
	p.Spec.NodeName = "kwok-node-0"
	for k, v := range d.Spec.Template.Labels {
		p.Labels[k] = v
	}
	return d, p
}
