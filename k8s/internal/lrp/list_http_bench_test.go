package lrp_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"code.cloudfoundry.org/lager/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/handler"
	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
)

// The GET /apps and GET /tasks benchmarks measure one call of the whole read path as CC makes
// it: router, bifrost, backend cache and the JSON body, written to a writer that discards it.

func BenchmarkGetApps1000(b *testing.B)  { benchmarkGetApps(b, 1000) }
func BenchmarkGetApps10000(b *testing.B) { benchmarkGetApps(b, 10000) }

func benchmarkGetApps(b *testing.B, n int) {
	router := benchRouter(b, manyLRPs(b, n))
	benchmarkGet(b, router, "/apps")
}

func BenchmarkGetTasks1000(b *testing.B) {
	router := benchRouter(b, manyTasks(b, 1000))
	benchmarkGet(b, router, "/tasks")
}

func benchmarkGet(b *testing.B, router http.Handler, path string) {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	w := &discardWriter{header: http.Header{}}
	router.ServeHTTP(w, req) // the first call may build what later calls reuse
	b.SetBytes(w.n)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w.n = 0
		router.ServeHTTP(w, req)
		if w.code != http.StatusOK {
			b.Fatalf("status %d", w.code)
		}
	}
}

// benchRouter is opi's router on a backend started on the given objects, once its cache holds
// them all.
func benchRouter(b *testing.B, objects []runtime.Object) http.Handler {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	backend := backendtest.MustBackend(backendtest.NewClient(objects...), lager.NewLogger("bench"), k8s.Options{Namespace: backendtest.Namespace, Store: store.Options{ReadWaitTimeout: time.Second}})
	if err := backend.Start(ctx); err != nil {
		b.Fatal(err)
	}
	return handler.New(handler.Config{
		LRP:    &bifrost.LRP{Backend: backend},
		Task:   &bifrost.Task{Backend: backend},
		Logger: lager.NewLogger("bench"),
	})
}

// desiredSample is a fake clientset holding what desire made through a backend on it.
func desiredSample(b *testing.B, desire func(context.Context, *k8s.Backend) error) *fake.Clientset {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := backendtest.NewClient()
	backend := backendtest.MustBackend(client, lager.NewLogger("bench"), k8s.Options{Namespace: backendtest.Namespace, Store: store.Options{ReadWaitTimeout: time.Second}})
	if err := backend.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if err := desire(ctx, backend); err != nil {
		b.Fatal(err)
	}
	return client
}

// manyLRPs are n Deployments as opi makes them: copies of a desired sample's, with guids of
// their own (desiring them one by one would take minutes at 10,000).
func manyLRPs(b *testing.B, n int) []runtime.Object {
	ctx := context.Background()
	client := desiredSample(b, func(ctx context.Context, backend *k8s.Backend) error {
		return backend.DesireLRP(ctx, backendtest.SampleLRP())
	})
	list, err := client.AppsV1().Deployments(backendtest.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		b.Fatalf("%v, %d deployments", err, len(list.Items))
	}
	template := &list.Items[0]
	objects := make([]runtime.Object, 0, n)
	for i := range n {
		d := template.DeepCopy()
		guid := fmt.Sprintf("%08d-0000-0000-0000-000000000000", i)
		d.Name = fmt.Sprintf("app-%d", i)
		d.UID = types.UID(fmt.Sprintf("uid-app-%d", i))
		d.Labels[names.LabelGUID] = guid
		objects = append(objects, d)
	}
	return objects
}

// manyTasks are n Jobs as opi makes them, copies of a desired sample task's.
func manyTasks(b *testing.B, n int) []runtime.Object {
	ctx := context.Background()
	client := desiredSample(b, func(ctx context.Context, backend *k8s.Backend) error {
		return backend.DesireTask(ctx, backendtest.SampleTask())
	})
	list, err := client.BatchV1().Jobs(backendtest.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		b.Fatalf("%v, %d jobs", err, len(list.Items))
	}
	template := &list.Items[0]
	objects := make([]runtime.Object, 0, n)
	for i := range n {
		j := template.DeepCopy()
		guid := fmt.Sprintf("%08d-1111-0000-0000-000000000000", i)
		j.Name = names.TaskJobName(guid)
		j.UID = types.UID("uid-task-" + guid)
		j.Labels[names.LabelTaskGUID] = guid
		j.Annotations[names.AnnotationTaskGUID] = guid
		objects = append(objects, j)
	}
	return objects
}

// discardWriter is a ResponseWriter that counts the body and drops it.
type discardWriter struct {
	header http.Header
	code   int
	n      int64
}

func (w *discardWriter) Header() http.Header { return w.header }

func (w *discardWriter) WriteHeader(code int) { w.code = code }

func (w *discardWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}
