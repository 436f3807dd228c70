package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/names"
)

// The two floors, both made with client-go in floorNamespace:
//   - one Deployment: the Deployment opi makes, with the env inlined in the pod spec and no other
//     object (what a bridge that writes only its workload pays);
//   - same objects: every object opi made for the template app, in opi's order: the Deployment
//     and the objects opi leaves owned by nothing (its Secrets) at once, then the rest in
//     parallel, each controlled by the Deployment from its creation (the cheapest order
//     client-go can make them in).
const (
	floorOneDeployment = "one Deployment"
	floorSameObjects   = "same objects"
	// floorSameAtOnce (-floor-at-once, logged only): the same objects, all created at once, none
	// owned by the workload: what writing the workload and its Secret in one round would allow.
	floorSameAtOnce = "same objects at once, not owned"
)

// tmplObject is one object opi made for the template app, as JSON naming the template app.
type tmplObject struct {
	gvr  schema.GroupVersionResource
	gvk  schema.GroupVersionKind
	json string
	// sharedName: the object's name does not name the app (an EndpointSlice of a route's
	// Service, named after the route and a digest of the LRP): each floor app's copy gets a
	// suffix of its own.
	sharedName bool
}

// template is what opi created for one app, with that app's identity to substitute.
type template struct {
	app      app
	name     string
	workload tmplObject
	// others are opi's other objects for the app (env Secret, Service, ...), each
	// controlled by the workload.
	others []tmplObject
}

// kinds names the template's kinds, for logs and the report.
func (t *template) kinds() []string {
	out := []string{t.workload.gvk.Kind}
	for _, o := range t.others {
		out = append(out, o.gvk.Kind)
	}
	return out
}

// captureTemplate desires one app through opi and reads back every object opi made for it:
// every namespaced kind the API server serves is listed by the app's labels, and the workload
// is kept with every object it controls but for what its own controller makes (ReplicaSets;
// a StatefulSet's pods and revisions). The app is then stopped and the run waits until it is gone.
// The floor never depends on the order opi writes in, only on what it finds.
func (e *env) captureTemplate(ctx context.Context, admin kubernetes.Interface) (*template, error) {
	a := newApp()
	body, code, err := e.call(ctx, http.MethodPut, "/apps/"+a.processGUID(), a.body())
	if err != nil || code != http.StatusAccepted {
		return nil, fmt.Errorf("desiring the template app: %d %s %v", code, body, err)
	}
	sel := metav1.ListOptions{LabelSelector: names.LabelGUID + "=" + a.guid + "," + names.LabelVersion + "=" + a.version}
	dyn, err := dynamic.NewForConfig(e.cluster.RestConfig())
	if err != nil {
		return nil, err
	}
	lists, err := admin.Discovery().ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("discovering the API server's resources: %w", err)
	}
	name, kind := a.deploymentName(), workloadKind(e.cfg.backend)
	if makesRouteObjects(e.cfg.routingMode()) {
		// The route's EndpointSlice of the app is the leader's, written moments after the
		// desire: wait for it, so that the floors write it too.
		slices := metav1.ListOptions{LabelSelector: sel.LabelSelector + "," + discoveryv1.LabelManagedBy + "=" + names.EndpointSliceManager}
		if err := poll(ctx, time.Minute, func() (bool, error) {
			l, err := admin.DiscoveryV1().EndpointSlices(opiNamespace).List(ctx, slices)
			return err == nil && len(l.Items) > 0, err
		}); err != nil {
			return nil, fmt.Errorf("waiting for the template app's route EndpointSlice: %w", err)
		}
	}
	var found []unstructured.Unstructured
	var gvrs []schema.GroupVersionResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !hasVerbs(r.Verbs, "list", "create") || r.Name == "events" {
				continue
			}
			gvr := gv.WithResource(r.Name)
			list, err := dyn.Resource(gvr).Namespace(opiNamespace).List(ctx, sel)
			if err != nil {
				return nil, fmt.Errorf("listing %s of the template app: %w", gvr, err)
			}
			for _, o := range list.Items {
				found = append(found, o)
				gvrs = append(gvrs, gvr)
			}
		}
	}
	t := &template{app: a, name: name}
	for i, o := range found {
		isWorkload := o.GetKind() == kind && o.GetName() == name && len(o.GetOwnerReferences()) == 0
		owned := false
		for _, ref := range o.GetOwnerReferences() {
			owned = owned || (ref.Kind == kind && ref.Name == name && ptr.Deref(ref.Controller, false))
		}
		// opi's own EndpointSlice of the app for a route's Service (ingress and gateway modes)
		// is controlled by that Service, not the workload, and is the app's all the same.
		routeSlice := o.GetKind() == "EndpointSlice" && o.GetLabels()[discoveryv1.LabelManagedBy] == names.EndpointSliceManager
		// opi's Secrets of the app are owned by nothing (ADR 0010), named after the workload.
		secret := o.GetKind() == "Secret" && len(o.GetOwnerReferences()) == 0 &&
			(o.GetName() == names.EnvSecretName(name) || o.GetName() == names.RegistrySecretName(name))
		if !isWorkload && !routeSlice && !secret && (!owned || controllerMade[o.GetKind()]) {
			continue // the controllers' objects: ReplicaSets, pods, EndpointSlices
		}
		obj := tmplObject{gvr: gvrs[i], gvk: o.GroupVersionKind(), sharedName: routeSlice}
		if obj.json, err = cleanJSON(o); err != nil {
			return nil, err
		}
		if isWorkload {
			t.workload = obj
		} else {
			t.others = append(t.others, obj)
		}
	}
	// The same order every run, for the per-call report.
	sort.Slice(t.others, func(i, j int) bool { return t.others[i].gvk.Kind < t.others[j].gvk.Kind })
	if t.workload.json == "" {
		return nil, fmt.Errorf("the template app has no %s %s (names.DeploymentName)", kind, name)
	}
	if !strings.Contains(t.workload.json, a.guid) || !strings.Contains(t.workload.json, a.version) {
		return nil, errors.New("the template workload does not name the template app")
	}

	if body, code, err := e.call(ctx, http.MethodPut, a.path()+"/stop", nil); err != nil || code != http.StatusOK {
		return nil, fmt.Errorf("stopping the template app: %d %s %v", code, body, err)
	}
	// The garbage collector removes its other objects, ReplicaSet and pod.
	err = poll(ctx, 2*time.Minute, func() (bool, error) {
		p, err := admin.CoreV1().Pods(opiNamespace).List(ctx, sel)
		if err != nil {
			return false, err
		}
		if len(p.Items) > 0 {
			return false, nil
		}
		for _, o := range t.others {
			l, err := dyn.Resource(o.gvr).Namespace(opiNamespace).List(ctx, sel)
			if err != nil || len(l.Items) > 0 {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for the template app's objects to go: %w", err)
	}
	return t, nil
}

func hasVerbs(have metav1.Verbs, want ...string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}

// controllerMade are the kinds the workloads' own controllers make, controlled by the
// workload: not opi's.
var controllerMade = map[string]bool{"ReplicaSet": true, "ControllerRevision": true, "Pod": true}

// cleanJSON is o without what the API server sets: status, and metadata but for name, labels,
// annotations (the Deployment controller's left out) and owner references. An allocated
// cluster IP is the API server's to choose; a headless Service keeps None.
func cleanJSON(o unstructured.Unstructured) (string, error) {
	c := unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range o.Object {
		if k != "metadata" && k != "status" {
			c.Object[k] = v
		}
	}
	c.SetName(o.GetName())
	c.SetLabels(o.GetLabels())
	ann := map[string]string{}
	for k, v := range o.GetAnnotations() {
		if !strings.HasPrefix(k, "deployment.kubernetes.io/") {
			ann[k] = v
		}
	}
	if len(ann) > 0 {
		c.SetAnnotations(ann)
	}
	if refs := o.GetOwnerReferences(); len(refs) > 0 {
		c.SetOwnerReferences(refs)
	}
	if o.GetKind() == "Service" {
		if ip, _, _ := unstructured.NestedString(o.Object, "spec", "clusterIP"); ip != corev1.ClusterIPNone {
			unstructured.RemoveNestedField(c.Object, "spec", "clusterIP")
			unstructured.RemoveNestedField(c.Object, "spec", "clusterIPs")
		}
	}
	b, err := json.Marshal(c.Object)
	return string(b), err
}

// built is a template object made for one app: typed when client-go knows its kind (then sent
// as protobuf, as opi sends), unstructured otherwise.
type built struct {
	gvr schema.GroupVersionResource
	obj runtime.Object
}

// objects are the template's objects for app a in ns: the workload and the others.
func (t *template) objects(a app, ns string) (built, []built, error) {
	r := strings.NewReplacer(t.name, a.deploymentName(), t.app.guid, a.guid, t.app.version, a.version)
	make1 := func(o tmplObject) (built, error) {
		b := []byte(r.Replace(o.json))
		var obj runtime.Object
		if scheme.Scheme.Recognizes(o.gvk) {
			typed, err := scheme.Scheme.New(o.gvk)
			if err != nil {
				return built{}, err
			}
			if err := json.Unmarshal(b, typed); err != nil {
				return built{}, err
			}
			obj = typed
		} else {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(b); err != nil {
				return built{}, err
			}
			obj = u
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return built{}, err
		}
		m.SetNamespace(ns)
		if o.sharedName {
			m.SetName(m.GetName() + "-" + a.guid[:8])
		}
		return built{gvr: o.gvr, obj: obj}, nil
	}
	w, err := make1(t.workload)
	if err != nil {
		return built{}, nil, err
	}
	others := make([]built, 0, len(t.others))
	for _, o := range t.others {
		b, err := make1(o)
		if err != nil {
			return built{}, nil, err
		}
		others = append(others, b)
	}
	return w, others, nil
}

// inlineEnv makes the workload's env references to the given Secrets plain values: the one
// Deployment floor's workload carries its env itself.
func inlineEnv(w runtime.Object, others []built) error {
	data := map[string]map[string][]byte{}
	for _, o := range others {
		if s, ok := o.obj.(*corev1.Secret); ok {
			data[s.Name] = s.Data
		}
	}
	var spec *corev1.PodSpec
	switch x := w.(type) {
	case *appsv1.Deployment:
		spec = &x.Spec.Template.Spec
	case *appsv1.StatefulSet:
		spec = &x.Spec.Template.Spec
	default:
		return fmt.Errorf("the workload is a %T, not a Deployment or StatefulSet", w)
	}
	for _, cs := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range cs {
			for j := range cs[i].Env {
				ev := &cs[i].Env[j]
				if ev.ValueFrom == nil || ev.ValueFrom.SecretKeyRef == nil {
					continue
				}
				d, ok := data[ev.ValueFrom.SecretKeyRef.Name]
				if !ok {
					continue // not one of opi's Secrets for the app (a registry's, say)
				}
				ev.Value, ev.ValueFrom = string(d[ev.ValueFrom.SecretKeyRef.Key]), nil
			}
			if len(cs[i].EnvFrom) > 0 {
				return errors.New("the template workload takes env from whole Secrets; the one Deployment floor cannot inline it")
			}
		}
	}
	return nil
}

// floorClient sends creates of any kind: typed kinds through one REST client per group version
// with opi's content type (protobuf), other kinds through the dynamic client. All share one
// rate limiter at opi's limits.
type floorClient struct {
	base    *rest.Config
	dyn     dynamic.Interface
	mu      sync.Mutex
	clients map[schema.GroupVersion]rest.Interface
}

func (e *env) floorClient() (*floorClient, error) {
	rc := e.cluster.RestConfig()
	rc.UserAgent = "opi-bench"
	rc.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(float32(e.cfg.qps), e.cfg.burst)
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	rc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	jsonRC := rest.CopyConfig(rc)
	jsonRC.ContentType, jsonRC.AcceptContentTypes = "application/json", "application/json"
	dyn, err := dynamic.NewForConfig(jsonRC)
	if err != nil {
		return nil, err
	}
	return &floorClient{base: rc, dyn: dyn, clients: map[schema.GroupVersion]rest.Interface{}}, nil
}

func (c *floorClient) rest(gv schema.GroupVersion) (rest.Interface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rc, ok := c.clients[gv]; ok {
		return rc, nil
	}
	cfg := rest.CopyConfig(c.base)
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	if gv.Group == "" {
		cfg.APIPath = "/api"
	}
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		return nil, err
	}
	c.clients[gv] = rc
	return rc, nil
}

// create creates b in ns and returns the object the API server answered.
func (c *floorClient) create(ctx context.Context, ns string, b built) (metav1.Object, error) {
	if u, ok := b.obj.(*unstructured.Unstructured); ok {
		return c.dyn.Resource(b.gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
	}
	rc, err := c.rest(b.gvr.GroupVersion())
	if err != nil {
		return nil, err
	}
	gvk := b.gvr.GroupVersion().WithKind(kindOf(b.obj))
	out, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	if err := rc.Post().Namespace(ns).Resource(b.gvr.Resource).Body(b.obj).Do(ctx).Into(out); err != nil {
		return nil, err
	}
	return meta.Accessor(out)
}

func kindOf(o runtime.Object) string {
	gvks, _, err := scheme.Scheme.ObjectKinds(o)
	if err != nil || len(gvks) == 0 {
		return ""
	}
	return gvks[0].Kind
}

// ownBy points b's controller reference to the workload (its template reference, with the
// new workload's name and uid).
func ownBy(b built, gvk schema.GroupVersionKind, name string, uid types.UID) error {
	m, err := meta.Accessor(b.obj)
	if err != nil {
		return err
	}
	refs := m.GetOwnerReferences()
	for i := range refs {
		if ptr.Deref(refs[i].Controller, false) {
			refs[i].APIVersion, refs[i].Kind = gvk.GroupVersion().String(), gvk.Kind
			refs[i].Name, refs[i].UID = name, uid
		}
	}
	m.SetOwnerReferences(refs)
	return nil
}

// floorOrder says in what order the same-objects floor writes kinds (the workload's first).
func floorOrder(kinds []string) string {
	return "in opi's order: the " + firstOr(kinds) + " and what opi leaves owned by nothing at once, then the rest in parallel, owned from creation"
}

// splitOwned parts objects into those without a controller and those with one.
func splitOwned(objects []built) (free, owned []built) {
	for _, o := range objects {
		if m, err := meta.Accessor(o.obj); err == nil && metav1.GetControllerOf(m) == nil {
			free = append(free, o)
		} else {
			owned = append(owned, o)
		}
	}
	return free, owned
}

// call is one create of the floor and its latency.
type call struct {
	name string
	took time.Duration
}

// floorBatch creates count apps the way floor says. An app is done when its last create is
// accepted. It also returns each call's latency, to show which write dominates.
func (e *env) floorBatch(ctx context.Context, c *floorClient, t *template, floor string, count int) (phase, [][]call, error) {
	calls := make([][]call, count)
	p, err := timed(ctx, count, e.cfg.concurrency, func(ctx context.Context, i int) (time.Duration, error) {
		a := newApp()
		w, others, err := t.objects(a, floorNamespace)
		if err != nil {
			return 0, err
		}
		if floor == floorOneDeployment {
			if err := inlineEnv(w.obj, others); err != nil {
				return 0, err
			}
			others = nil
		}
		wname := "create " + strings.ToLower(t.workload.gvk.Kind)
		start := time.Now()
		if floor == floorSameAtOnce {
			errs := make([]error, len(others)+1)
			var wg sync.WaitGroup
			for j, b := range append([]built{w}, others...) {
				if m, err := meta.Accessor(b.obj); err == nil && j > 0 {
					m.SetOwnerReferences(nil)
				}
				wg.Go(func() { _, errs[j] = c.create(ctx, floorNamespace, b) })
			}
			wg.Wait()
			return time.Since(start), errors.Join(errs...)
		}
		// As opi orders them: the objects it leaves owned by nothing (its Secrets) beside the
		// workload, the ones it makes controlled by the workload once the workload's uid is known.
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			first error
			rest  []call
		)
		createOther := func(o built) {
			s := time.Now()
			name := "create " + strings.ToLower(kindOf(o.obj))
			if u, ok := o.obj.(*unstructured.Unstructured); ok {
				name = "create " + strings.ToLower(u.GetKind())
			}
			_, err := c.create(ctx, floorNamespace, o)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = fmt.Errorf("%s: %w", name, err)
			}
			rest = append(rest, call{name, time.Since(s)})
		}
		free, owned := splitOwned(others)
		for _, o := range free {
			wg.Go(func() { createOther(o) })
		}
		created, err := c.create(ctx, floorNamespace, w)
		if err != nil {
			wg.Wait()
			return 0, fmt.Errorf("%s: %w", wname, err)
		}
		mine := []call{{wname, time.Since(start)}}
		for _, o := range owned {
			if err := ownBy(o, t.workload.gvk, created.GetName(), created.GetUID()); err != nil {
				wg.Wait()
				return 0, err
			}
			wg.Go(func() { createOther(o) })
		}
		wg.Wait()
		if first != nil {
			return 0, first
		}
		mine = append(mine, rest...)
		calls[i] = mine
		return time.Since(start), nil
	})
	return p, calls, err
}

// stepPercentiles are the p50 and p99 of each kind of call, the workload's first.
func stepPercentiles(calls [][]call) []step {
	by := map[string][]time.Duration{}
	var names []string
	for _, app := range calls {
		for _, c := range app {
			if _, ok := by[c.name]; !ok {
				names = append(names, c.name)
			}
			by[c.name] = append(by[c.name], c.took)
		}
	}
	var out []step
	for _, n := range names {
		p50, p99 := percentiles(by[n])
		out = append(out, step{Call: n, P50: p50, P99: p99})
	}
	return out
}

// cleanFloor deletes everything the floors made in their namespace (and what the controllers
// made from it), without waiting for the garbage collector: the workloads first (so no
// controller makes new ReplicaSets or pods), then the template's other kinds, then the
// controllers' objects, pods with no grace period. It returns once none is left.
func (e *env) cleanFloor(ctx context.Context, t *template) (time.Duration, error) {
	start := time.Now()
	rc := e.cluster.RestConfig()
	rc.WarningHandler = rest.NoWarnings{} // v1 Endpoints' deprecation, on every poll
	md, err := metadata.NewForConfig(rc)
	if err != nil {
		return 0, err
	}
	gvrs := []schema.GroupVersionResource{t.workload.gvr}
	for _, o := range t.others {
		gvrs = append(gvrs, o.gvr)
	}
	gvrs = append(gvrs,
		appsv1.SchemeGroupVersion.WithResource("replicasets"),
		appsv1.SchemeGroupVersion.WithResource("controllerrevisions"),
		corev1.SchemeGroupVersion.WithResource("pods"),
		schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"},
		corev1.SchemeGroupVersion.WithResource("endpoints"),
	)
	left := func(gvr schema.GroupVersionResource) (int, error) {
		l, err := md.Resource(gvr).Namespace(floorNamespace).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return 0, err
		}
		n := len(l.Items)
		if l.RemainingItemCount != nil {
			n += int(*l.RemainingItemCount)
		} else if l.Continue != "" {
			n++ // at least one more; the exact count does not matter here
		}
		return n, nil
	}
	var last string
	err = poll(ctx, 10*time.Minute, func() (bool, error) {
		var rest []string
		for _, gvr := range gvrs {
			n, err := left(gvr)
			if err != nil {
				if apierrors.IsNotFound(err) {
					continue // a kind this API server does not serve
				}
				return false, err
			}
			if n == 0 {
				continue
			}
			rest = append(rest, fmt.Sprintf("%d %s", n, gvr.Resource))
			opts := metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationBackground)}
			if gvr.Resource == "pods" {
				opts.GracePeriodSeconds = ptr.To[int64](0)
			}
			if err := md.Resource(gvr).Namespace(floorNamespace).DeleteCollection(ctx, opts, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("deleting the floor's %s: %w", gvr.Resource, err)
			}
		}
		last = strings.Join(rest, ", ")
		return len(rest) == 0, nil
	})
	if err != nil {
		return 0, fmt.Errorf("cleaning the floor namespace (left: %s): %w", last, err)
	}
	return time.Since(start), nil
}

// workloadKind is the Kubernetes kind of the backend's workloads.
func workloadKind(backend string) string {
	if backend == backendStatefulSets {
		return "StatefulSet"
	}
	return "Deployment"
}

// routingMode is the routing mode opi runs in: nats with -routing nats, else what -opi-args give
// ("" when they give none: opi's default, ingress).
func (c config) routingMode() string {
	if c.routing == routingNATS {
		return routingNATS
	}
	return routingOf(c.opiArgs)
}

// routingOf is the routing mode opiArgs give opi ("" when they give none: opi's default).
func routingOf(opiArgs string) string {
	fields := strings.Fields(opiArgs)
	mode := ""
	for i, f := range fields {
		if v, ok := strings.CutPrefix(f, "--routing="); ok {
			mode = v
		} else if f == "--routing" && i+1 < len(fields) {
			mode = fields[i+1]
		}
	}
	return mode
}

// makesRouteObjects says whether opi in routing mode mode keeps route objects (ingress, its
// default "", or gateway).
func makesRouteObjects(mode string) bool {
	return mode == "" || mode == "ingress" || mode == "gateway"
}
