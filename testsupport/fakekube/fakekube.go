// Package fakekube is client-go's fake clientset made to write as an API server does, for the
// backend's unit suites: created objects get a UID and a generation, every write a new resource
// version, a workload whose spec changes a new generation, and patches (merge and strategic
// merge) are applied by the fake itself so that they get one too. The plain fake leaves all of
// these empty, and owner references, conditional deletes and cache waits need them.
package fakekube

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// NewClientset is a fake clientset holding objects that writes as described above.
func NewClientset(objects ...runtime.Object) *fake.Clientset {
	client := fake.NewClientset(objects...)
	var mu sync.Mutex
	next := 1000
	stamp := func(action k8stesting.Action) (bool, runtime.Object, error) {
		var obj runtime.Object
		switch a := action.(type) {
		case k8stesting.CreateAction:
			obj = a.GetObject()
		case k8stesting.UpdateAction:
			obj = a.GetObject()
		default:
			return false, nil, nil
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		next++
		if action.GetVerb() == "create" {
			if m.GetUID() == "" {
				m.SetUID(types.UID(fmt.Sprintf("uid-%d", next)))
			}
			m.SetGeneration(1)
		} else if isWorkload(obj) {
			m.SetGeneration(m.GetGeneration() + 1)
		}
		m.SetResourceVersion(strconv.Itoa(next))
		return false, nil, nil
	}
	client.PrependReactor("create", "*", stamp)
	client.PrependReactor("update", "*", stamp)
	client.PrependReactor("patch", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		pa := action.(k8stesting.PatchAction)
		current, err := client.Tracker().Get(pa.GetResource(), pa.GetNamespace(), pa.GetName())
		if err != nil {
			return true, nil, err
		}
		original, err := json.Marshal(current)
		if err != nil {
			return true, nil, err
		}
		var patched []byte
		switch pa.GetPatchType() {
		case types.StrategicMergePatchType:
			patched, err = strategicpatch.StrategicMergePatch(original, pa.GetPatch(), current)
		case types.MergePatchType:
			patched, err = jsonpatch.MergePatch(original, pa.GetPatch())
		default:
			return false, nil, nil
		}
		if err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		// A fresh object of the same type: decoding into a copy of current would keep the map
		// keys the patch removed.
		obj := reflect.New(reflect.TypeOf(current).Elem()).Interface().(runtime.Object)
		if err := json.Unmarshal(patched, obj); err != nil {
			return true, nil, err
		}
		m, _ := meta.Accessor(obj)
		mu.Lock()
		next++
		m.SetResourceVersion(strconv.Itoa(next))
		mu.Unlock()
		if d, ok := obj.(*appsv1.Deployment); ok && !equality.Semantic.DeepEqual(d.Spec, current.(*appsv1.Deployment).Spec) {
			d.Generation++
		}
		if s, ok := obj.(*appsv1.StatefulSet); ok && !equality.Semantic.DeepEqual(s.Spec, current.(*appsv1.StatefulSet).Spec) {
			s.Generation++
		}
		if err := client.Tracker().Update(pa.GetResource(), obj, pa.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
	return client
}

// isWorkload says obj is a Deployment or StatefulSet (whose spec changes bump the generation).
func isWorkload(obj runtime.Object) bool {
	switch obj.(type) {
	case *appsv1.Deployment, *appsv1.StatefulSet:
		return true
	}
	return false
}

// ActionsSince describes the client's actions from index from on (Describe), leaving out those
// of the verbs skipped (e.g. "watch", "list").
func ActionsSince(client *fake.Clientset, from int, skipped ...string) []string {
	var out []string
	for _, a := range client.Actions()[from:] {
		if slices.Contains(skipped, a.GetVerb()) {
			continue
		}
		out = append(out, Describe(a))
	}
	return out
}

// Describe is an action as "verb resource[/subresource] name" (no name for a list).
func Describe(a k8stesting.Action) string {
	res := a.GetResource().Resource
	if sub := a.GetSubresource(); sub != "" {
		res += "/" + sub
	}
	name := ""
	switch act := a.(type) {
	case k8stesting.CreateAction:
		if m, err := meta.Accessor(act.GetObject()); err == nil {
			name = m.GetName()
		}
	case k8stesting.UpdateAction:
		if m, err := meta.Accessor(act.GetObject()); err == nil {
			name = m.GetName()
		}
	case k8stesting.GetAction:
		name = act.GetName()
	case k8stesting.DeleteAction:
		name = act.GetName()
	case k8stesting.PatchAction:
		name = act.GetName()
	}
	if name == "" {
		return a.GetVerb() + " " + res
	}
	return a.GetVerb() + " " + res + " " + name
}
