package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/opi-bridge/opi/k8s/names"
)

// final is the comparison of the end state with the model.
type final struct {
	ModelDesired   int      `json:"model_desired"`
	ModelStopped   int      `json:"model_stopped"`
	KubeDeploy     int      `json:"kube_deployments"`
	KubeSecrets    int      `json:"kube_secrets"`
	KubeServices   int      `json:"kube_services"`
	Listed         int      `json:"listed"`
	Mismatches     []string `json:"mismatches"`
	SettledSeconds float64  `json:"settled_seconds"`
}

// settle compares Kubernetes and GET /apps with the model until they match or timeout passes
// (the garbage collector removes a stopped app's Service a moment after its Deployment).
func settle(ctx context.Context, d *driver, kube kubernetes.Interface, timeout time.Duration) final {
	start := time.Now()
	var f final
	// compare gets ctx, not the poll's context: its last round must not be cut by the timeout.
	_ = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		f = compare(ctx, d, kube)
		return len(f.Mismatches) == 0, nil
	})
	f.SettledSeconds = time.Since(start).Seconds()
	return f
}

type wantApp struct {
	instances  int32
	annotation string
}

func compare(ctx context.Context, d *driver, kube kubernetes.Interface) final {
	var f final
	want := map[string]wantApp{}
	for _, a := range d.apps {
		a.mu.Lock()
		if a.desired {
			want[a.processGUID()] = wantApp{int32(a.instances), a.annotation}
		}
		a.mu.Unlock()
	}
	f.ModelDesired, f.ModelStopped = len(want), len(d.apps)-len(want)
	mismatch := func(format string, args ...any) {
		if len(f.Mismatches) < 50 {
			f.Mismatches = append(f.Mismatches, fmt.Sprintf(format, args...))
		}
	}

	opts := metav1.ListOptions{LabelSelector: names.LabelSourceType + "=" + names.SourceTypeApp}
	deployments, err := kube.AppsV1().Deployments(namespace).List(ctx, opts)
	if err != nil {
		mismatch("list deployments: %v", err)
		return f
	}
	secrets, err := kube.CoreV1().Secrets(namespace).List(ctx, opts)
	if err != nil {
		mismatch("list secrets: %v", err)
		return f
	}
	services, err := kube.CoreV1().Services(namespace).List(ctx, opts)
	if err != nil {
		mismatch("list services: %v", err)
		return f
	}
	f.KubeDeploy, f.KubeSecrets, f.KubeServices = len(deployments.Items), len(secrets.Items), len(services.Items)

	seen := map[string]int{}
	live := map[string]bool{}    // deployment uid
	envOf := map[string]string{} // env Secret name → its deployment's uid
	for _, dep := range deployments.Items {
		pg := dep.Labels[names.LabelGUID] + "-" + dep.Labels[names.LabelVersion]
		seen[pg]++
		live[string(dep.UID)] = true
		envOf[names.EnvSecretName(dep.Name)] = string(dep.UID)
		w, ok := want[pg]
		switch {
		case !ok:
			mismatch("deployment %s of %s exists, the model has it stopped", dep.Name, pg)
		case dep.Spec.Replicas == nil || *dep.Spec.Replicas != w.instances:
			mismatch("deployment %s: replicas %v, model %d", dep.Name, dep.Spec.Replicas, w.instances)
		case dep.Annotations[names.AnnotationLastUpdated] != w.annotation:
			mismatch("deployment %s: annotation %q, model %q", dep.Name, dep.Annotations[names.AnnotationLastUpdated], w.annotation)
		}
	}
	for pg := range want {
		if seen[pg] != 1 {
			mismatch("%s: %d deployments, model 1", pg, seen[pg])
		}
	}
	owned := map[string]int{}
	for _, s := range secrets.Items {
		ref := metav1.GetControllerOf(&s)
		if uid, ok := envOf[s.Name]; ok && ref == nil {
			// A desire leaves the env Secret owned by nothing (ADR 0010): it is the live
			// Deployment's it is named after.
			owned[uid]++
			continue
		}
		if ref == nil || !live[string(ref.UID)] {
			mismatch("secret %s has no live owner", s.Name)
			continue
		}
		owned[string(ref.UID)]++
	}
	for _, s := range services.Items {
		ref := metav1.GetControllerOf(&s)
		if ref == nil || !live[string(ref.UID)] {
			mismatch("service %s has no live owner", s.Name)
			continue
		}
		owned[string(ref.UID)] += 10
	}
	for _, dep := range deployments.Items {
		if owned[string(dep.UID)] != 11 {
			mismatch("deployment %s does not have exactly its env secret and own its service", dep.Name)
		}
	}

	// What CC sees.
	status, body, _, err := d.call(http.MethodGet, "/apps", "")
	if err != nil || status != http.StatusOK {
		mismatch("GET /apps: %d %v", status, err)
		return f
	}
	var list struct {
		Infos []struct {
			Key struct {
				ProcessGUID string `json:"process_guid"`
			} `json:"desired_lrp_key"`
			Annotation string `json:"annotation"`
			Instances  int32  `json:"instances"`
		} `json:"desired_lrp_scheduling_infos"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		mismatch("GET /apps: %v", err)
		return f
	}
	f.Listed = len(list.Infos)
	listed := map[string]bool{}
	for _, info := range list.Infos {
		pg := info.Key.ProcessGUID
		listed[pg] = true
		w, ok := want[pg]
		switch {
		case !ok:
			mismatch("GET /apps lists %s, the model has it stopped", pg)
		case info.Instances != w.instances || info.Annotation != w.annotation:
			mismatch("GET /apps: %s instances %d annotation %q, model %d %q", pg, info.Instances, info.Annotation, w.instances, w.annotation)
		}
	}
	var missing []string
	for pg := range want {
		if !listed[pg] {
			missing = append(missing, pg)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		mismatch("GET /apps lacks %d desired apps: %s", len(missing), strings.Join(missing, ", "))
	}
	return f
}
