package routeobjects

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

type zzCache struct {
	workloads map[string]*store.WorkloadRecord
	pods      map[string][]*store.PodRecord
}

func (c *zzCache) Workload(id opi.LRPIdentifier) *store.WorkloadRecord {
	return c.workloads[id.GUID+"/"+id.Version]
}
func (c *zzCache) Workloads() []*store.WorkloadRecord { return nil }
func (c *zzCache) Pods(id opi.LRPIdentifier) []*store.PodRecord {
	return c.pods[id.GUID+"/"+id.Version]
}
func (*zzCache) AddWorkloadHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return nil, nil
}
func (*zzCache) RemoveWorkloadHandler(cache.ResourceEventHandlerRegistration) error { return nil }
func (*zzCache) AddPodHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return nil, nil
}
func (*zzCache) RemovePodHandler(cache.ResourceEventHandlerRegistration) error { return nil }

func heap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

type svcRec struct {
	Name, ResourceVersion string
	UID                   types.UID
	Labels, Annotations   map[string]string
	Owners                []metav1.OwnerReference
	Ports                 []corev1.ServicePort
}
type sliceRec struct {
	Name, ResourceVersion string
	UID                   types.UID
	Labels, Annotations   map[string]string
	Owners                []metav1.OwnerReference
	AddressType           discoveryv1.AddressType
	Ports                 []discoveryv1.EndpointPort
	Endpoints             []discoveryv1.Endpoint
}
type ingRec struct {
	Name, ResourceVersion string
	UID                   types.UID
	Labels, Annotations   map[string]string
	Owners                []metav1.OwnerReference
	Spec                  networkingv1.IngressSpec
}

const zzN = 10000
const zzNS = "cf-apps"

func TestZZMeasure(t *testing.T) {
	cc := &zzCache{workloads: map[string]*store.WorkloadRecord{}, pods: map[string][]*store.PodRecord{}}
	c, err := New(lagertest.NewTestLogger("m"), Config{Namespace: zzNS, Routing: hooks.RoutingOptions{Mode: hooks.RoutingIngress, IngressClass: "nginx"}},
		Deps{Client: fake.NewClientset(), Cache: cc})
	if err != nil {
		t.Fatal(err)
	}
	var svcB, sliceB, ingB [][]byte
	t0 := time.Unix(1767225600, 0)
	for i := range zzN {
		space := uuid.NewString()
		host := fmt.Sprintf("app-%05d.apps.example.com", i)
		guid, version := uuid.NewString(), uuid.NewString()
		w := &store.WorkloadRecord{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%05d-dev-%010x", i, i)},
			LRPRef: store.LRPRef{GUID: guid, Version: version}, SpaceGUID: space,
			RoutesAnnotation: fmt.Sprintf(`[{"hostname":%q,"port":8080}]`, host)}
		cc.workloads[guid+"/"+version] = w
		cc.pods[guid+"/"+version] = []*store.PodRecord{{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%05d-dev-%010x-%010x-x7k2p", i, i, i*7), UID: types.UID(uuid.NewString())},
			LRPRef:     store.LRPRef{GUID: guid, Version: version},
			IP:         fmt.Sprintf("10.244.%d.%d", i/250, i%250+2), Node: fmt.Sprintf("worker-%03d", i%100), ReadySince: 1,
		}}
		key := names.RouteKey(space, host)
		want := c.desired(key, space, host, []string{guid + "/" + version})
		if len(want.services) != 1 || want.ingress == nil {
			t.Fatalf("want %+v", want)
		}
		ts := metav1.NewTime(t0.Add(time.Duration(i) * time.Second))
		rv := func(k int) string { return fmt.Sprint(184467000 + 3*i + k) }
		var svc *corev1.Service
		for _, s := range want.services {
			svc = s
		}
		svc.UID, svc.ResourceVersion, svc.CreationTimestamp = types.UID(uuid.NewString()), rv(0), ts
		ip := fmt.Sprintf("10.96.%d.%d", i/250, i%250+10)
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = ip, []string{ip}
		svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		svc.Spec.IPFamilyPolicy = ptr.To(corev1.IPFamilyPolicySingleStack)
		svc.Spec.SessionAffinity = corev1.ServiceAffinityNone
		svc.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
		sls := want.slices[svc.Name]
		if len(sls) != 1 {
			t.Fatal("slices", len(sls))
		}
		sl := sls[0]
		sl.OwnerReferences = []metav1.OwnerReference{kube.ControllerRef(svc, "v1", "Service")}
		sl.UID, sl.ResourceVersion, sl.CreationTimestamp, sl.Generation = types.UID(uuid.NewString()), rv(1), ts, 1
		ing := want.ingress
		ing.UID, ing.ResourceVersion, ing.CreationTimestamp, ing.Generation = types.UID(uuid.NewString()), rv(2), ts, 1
		ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "203.0.113.10"}}
		if i == 0 {
			for _, o := range []any{svc, sl, ing} {
				y, _ := yaml.Marshal(o)
				t.Logf("\n%s", y)
			}
		}
		for _, p := range []struct {
			m  interface{ Marshal() ([]byte, error) }
			to *[][]byte
		}{{svc, &svcB}, {sl, &sliceB}, {ing, &ingB}} {
			b, err := p.m.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			*p.to = append(*p.to, b)
		}
	}
	c, cc = nil, nil
	t.Logf("encoded protobuf bytes/obj: svc %d slice %d ing %d", len(svcB[0]), len(sliceB[0]), len(ingB[0]))

	routeIdx := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, byRouteKey: routeKeyOf}
	sliceIdx := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, byRouteKey: routeKeyOf,
		byCarrier: func(obj any) ([]string, error) {
			if o, ok := obj.(metav1.Object); ok {
				if carrier := carrierKeyOf(o); carrier != "" {
					return []string{carrier}, nil
				}
			}
			return nil, nil
		}}

	measure := func(kind string, enc [][]byte, decode func([]byte) any, indexers cache.Indexers, toRec func(any) any, recIdx cache.Indexers) {
		objs := make([]any, zzN)
		h0 := heap()
		for i, b := range enc {
			objs[i] = decode(b)
		}
		h1 := heap()
		per := func(a, b uint64) float64 { return float64(int64(b)-int64(a)) / zzN }
		fill := func(ix cache.Indexers) float64 {
			before := heap()
			idx := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, ix)
			for _, o := range objs {
				if err := idx.Add(o); err != nil {
					t.Fatal(err)
				}
			}
			after := heap()
			runtime.KeepAlive(idx)
			return per(before, after)
		}
		none := fill(cache.Indexers{})
		nsOnly := fill(cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		all := fill(indexers)
		runtime.KeepAlive(objs)
		objs = nil
		// compact records from fresh decodes (the decoded object is dropped).
		recs := make([]any, zzN)
		r0 := heap()
		for i, b := range enc {
			recs[i] = toRec(decode(b))
		}
		r1 := heap()
		ridx := cache.NewIndexer(func(obj any) (string, error) {
			return zzNS + "/" + recName(obj), nil
		}, recIdx)
		for _, r := range recs {
			ridx.Add(r)
		}
		r2 := heap()
		runtime.KeepAlive(recs)
		runtime.KeepAlive(ridx)
		t.Logf("%-6s object %6.0f | store(no idx) +%4.0f | +ns idx %4.0f | controller idx %4.0f | total %6.0f || record %5.0f + idx %4.0f = %5.0f",
			kind, per(h0, h1), none, nsOnly, all, per(h0, h1)+all, per(r0, r1), per(r1, r2), per(r0, r2))
	}
	labelsOf := func(obj any) map[string]string {
		switch r := obj.(type) {
		case *svcRec:
			return r.Labels
		case *sliceRec:
			return r.Labels
		case *ingRec:
			return r.Labels
		}
		return nil
	}
	recRouteIdx := cache.Indexers{
		cache.NamespaceIndex: func(any) ([]string, error) { return []string{zzNS}, nil },
		byRouteKey:           func(obj any) ([]string, error) { return []string{labelsOf(obj)[names.LabelRouteKey]}, nil },
	}
	recSliceIdx := cache.Indexers{
		cache.NamespaceIndex: recRouteIdx[cache.NamespaceIndex], byRouteKey: recRouteIdx[byRouteKey],
		byCarrier: func(obj any) ([]string, error) {
			l := labelsOf(obj)
			return []string{l[names.LabelRouteKey] + "/" + store.LRPRef{GUID: l[names.LabelGUID], Version: l[names.LabelVersion]}.LRPKey()}, nil
		},
	}

	measure("svc", svcB, func(b []byte) any {
		o := &corev1.Service{}
		if err := o.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		return o
	}, routeIdx, func(obj any) any {
		o := obj.(*corev1.Service)
		return &svcRec{o.Name, o.ResourceVersion, o.UID, o.Labels, o.Annotations, o.OwnerReferences, o.Spec.Ports}
	}, recRouteIdx)
	measure("slice", sliceB, func(b []byte) any {
		o := &discoveryv1.EndpointSlice{}
		if err := o.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		return o
	}, sliceIdx, func(obj any) any {
		o := obj.(*discoveryv1.EndpointSlice)
		return &sliceRec{o.Name, o.ResourceVersion, o.UID, o.Labels, o.Annotations, o.OwnerReferences, o.AddressType, o.Ports, o.Endpoints}
	}, recSliceIdx)
	measure("ing", ingB, func(b []byte) any {
		o := &networkingv1.Ingress{}
		if err := o.Unmarshal(b); err != nil {
			t.Fatal(err)
		}
		return o
	}, routeIdx, func(obj any) any {
		o := obj.(*networkingv1.Ingress)
		return &ingRec{o.Name, o.ResourceVersion, o.UID, o.Labels, o.Annotations, o.OwnerReferences, o.Spec}
	}, recRouteIdx)
}

func recName(obj any) string {
	switch r := obj.(type) {
	case *svcRec:
		return r.Name
	case *sliceRec:
		return r.Name
	case *ingRec:
		return r.Name
	}
	return ""
}
