package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// apiStandin is a loopback stand-in of the API server for the agent binary: it serves, as JSON,
// the lists the agent makes (the bench's pods and their Deployments; no Jobs, no StatefulSets)
// and holds each watch open without events until the agent goes (nothing changes on the node
// during a run). A streaming list (sendInitialEvents) is refused: client-go falls back to a
// list and a watch. No control plane, so the agent is the only process measured.
type apiStandin struct {
	srv  *http.Server
	addr string
	done chan struct{}
}

func startAPIStandin(pods int) (*apiStandin, error) {
	rv := metav1.ListMeta{ResourceVersion: "1"}
	deployments := appsv1.DeploymentList{TypeMeta: metav1.TypeMeta{Kind: "DeploymentList", APIVersion: "apps/v1"}, ListMeta: rv}
	podList := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, ListMeta: rv}
	for i := range pods {
		d, p := benchPod(i)
		deployments.Items = append(deployments.Items, *d)
		podList.Items = append(podList.Items, *p)
	}
	lists := map[string]any{
		"/api/v1/namespaces/" + agentNamespace + "/pods":               &podList,
		"/apis/apps/v1/namespaces/" + agentNamespace + "/deployments":  &deployments,
		"/apis/apps/v1/namespaces/" + agentNamespace + "/statefulsets": &appsv1.StatefulSetList{TypeMeta: metav1.TypeMeta{Kind: "StatefulSetList", APIVersion: "apps/v1"}, ListMeta: rv},
		"/apis/batch/v1/namespaces/" + agentNamespace + "/jobs":        &batchv1.JobList{TypeMeta: metav1.TypeMeta{Kind: "JobList", APIVersion: "batch/v1"}, ListMeta: rv},
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &apiStandin{addr: l.Addr().String(), done: make(chan struct{})}
	s.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		obj, ok := lists[r.URL.Path]
		if !ok || r.Method != http.MethodGet {
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, http.StatusNotFound)
			return
		}
		q := r.URL.Query()
		if q.Get("watch") == "true" || q.Get("watch") == "1" {
			if q.Get("sendInitialEvents") == "true" {
				http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"BadRequest","code":400}`, http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
			select {
			case <-r.Context().Done():
			case <-s.done:
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(obj)
	})}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// kubeconfig writes a kubeconfig for the stand-in (plain HTTP on loopback, no credentials).
func (s *apiStandin) kubeconfig(path string) error {
	cfg := strings.Join([]string{
		"apiVersion: v1", "kind: Config",
		"clusters:", "- name: standin", "  cluster:", "    server: http://" + s.addr,
		"contexts:", "- name: standin", "  context:", "    cluster: standin", "    user: standin",
		"users:", "- name: standin", "  user: {}",
		"current-context: standin", "",
	}, "\n")
	return os.WriteFile(path, []byte(cfg), 0o600)
}

func (s *apiStandin) stop() {
	close(s.done)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logf("api stand-in: %v", err)
	}
}
