package routeobjects

import (
	"context"
	"errors"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	networkinginformers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/tools/cache"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
	gatewayv1informers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions/apis/v1"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/informer"
	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
)

// byRouteKey indexes the Services and EndpointSlices by their route key label; byCarrier the
// EndpointSlices by route key and LRP key ("<route key>/<lrp key>", from their guid and version
// labels). The Ingress or HTTPRoute of a route key is found by its name, which the key gives
// (names.RouteObjectName): an index would cost some 300 bytes per route.
const (
	byRouteKey = "route-key"
	byCarrier  = "carrier"
)

// informed are the informers of the route objects of the controller's mode: the Services and
// the EndpointSlices, indexed by route key, and the Ingresses or the HTTPRoutes.
type informed struct {
	namespace                string
	services, slices, routes cache.SharedIndexInformer
	// written are the objects of each kind the term wrote whose event has not come yet.
	servicesWritten, slicesWritten, routesWritten *recent
}

// informers starts informers on the route objects (RouteSelector only: they never see an
// LRP's objects) until ctx ends, hands changed the queue key of every event (an LRP's slices
// for an EndpointSlice of one, else the route key), and waits for their caches.
func (c *Controller) informers(ctx context.Context, changed func(queueKey string)) (*informed, error) {
	onlyRoutes := func(o *metav1.ListOptions) { o.LabelSelector = names.RouteSelector }
	ns := c.cfg.Namespace
	core := informers.NewSharedInformerFactoryWithOptions(c.client, 0)
	in := &informed{
		namespace:       ns,
		services:        informer.Unindexed(core, &corev1.Service{}, ns, names.RouteSelector, coreinformers.NewFilteredServiceInformer),
		slices:          informer.Unindexed(core, &discoveryv1.EndpointSlice{}, ns, names.RouteSelector, discoveryinformers.NewFilteredEndpointSliceInformer),
		servicesWritten: newRecent(), slicesWritten: newRecent(), routesWritten: newRecent(),
	}
	// The caches hold every route's objects without their managed fields (written back whole,
	// they keep the stored ones): at one route per LRP about a third of their bytes; and one
	// copy of their label and annotation keys, namespace and low-cardinality values.
	shared := []string{names.LabelSourceType, names.LabelManagedBy, discoveryv1.LabelManagedBy, names.AnnotationSpaceGUID, names.AnnotationRoutePath}
	transforms := []cache.TransformFunc{kube.Compacted[corev1.Service](shared...), kube.Compacted[discoveryv1.EndpointSlice](shared...)}
	var gw gatewayinformers.SharedInformerFactory
	if c.cfg.Routing.Mode == hooks.RoutingGateway {
		gw = gatewayinformers.NewSharedInformerFactoryWithOptions(c.gateway, 0)
		in.routes = gw.InformerFor(&gatewayv1.HTTPRoute{}, func(client gateway.Interface, resync time.Duration) cache.SharedIndexInformer {
			return gatewayv1informers.NewFilteredHTTPRouteInformer(client, ns, resync, cache.Indexers{}, onlyRoutes)
		})
		transforms = append(transforms, kube.Compacted[gatewayv1.HTTPRoute](shared...))
	} else {
		in.routes = informer.Unindexed(core, &networkingv1.Ingress{}, ns, names.RouteSelector, networkinginformers.NewFilteredIngressInformer)
		transforms = append(transforms, kube.Compacted[networkingv1.Ingress](shared...))
	}
	enqueue := func(obj any) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		o, ok := obj.(metav1.Object)
		if !ok || o.GetLabels()[names.LabelRouteKey] == "" {
			return
		}
		if _, slice := o.(*discoveryv1.EndpointSlice); slice {
			if carrier := carrierKeyOf(o); carrier != "" {
				changed(slicesPrefix + carrier)
				return
			}
		}
		changed(routePrefix + o.GetLabels()[names.LabelRouteKey])
	}
	written := in.written()
	for i, inf := range in.all() {
		// The store holds an event's object before the handlers hear of it: once seen, the
		// cache's look is as new as the write.
		seen := written[i].seen
		handler := cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { seen(obj); enqueue(obj) },
			UpdateFunc: func(_, obj any) { seen(obj); enqueue(obj) },
			DeleteFunc: func(obj any) { seen(obj); enqueue(obj) },
		}
		if err := inf.SetTransform(transforms[i]); err != nil {
			return nil, err
		}
		indexers := cache.Indexers{byRouteKey: routeKeyOf}
		switch inf {
		case in.routes:
			indexers = nil
		case in.slices:
			indexers[byCarrier] = func(obj any) ([]string, error) {
				if o, ok := obj.(metav1.Object); ok {
					if carrier := carrierKeyOf(o); carrier != "" {
						return []string{carrier}, nil
					}
				}
				return nil, nil
			}
		}
		if len(indexers) > 0 {
			if err := inf.AddIndexers(indexers); err != nil {
				return nil, err
			}
		}
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, err
		}
	}
	core.Start(ctx.Done())
	if gw != nil {
		gw.Start(ctx.Done())
	}
	synced := make([]cache.InformerSynced, 0, 3)
	for _, inf := range in.all() {
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, errors.New("route object caches did not sync before the term ended")
	}
	return in, nil
}

func (in *informed) all() []cache.SharedIndexInformer {
	return []cache.SharedIndexInformer{in.services, in.slices, in.routes}
}

// written are the written objects of all()'s informers, in its order.
func (in *informed) written() []*recent {
	return []*recent{in.servicesWritten, in.slicesWritten, in.routesWritten}
}

func routeKeyOf(obj any) ([]string, error) {
	o, ok := obj.(metav1.Object)
	if !ok || o.GetLabels()[names.LabelRouteKey] == "" {
		return nil, nil
	}
	return []string{o.GetLabels()[names.LabelRouteKey]}, nil
}

// carrierKeyOf is "<route key>/<lrp key>" of an EndpointSlice of one LRP's instances, else "".
func carrierKeyOf(o metav1.Object) string {
	l := o.GetLabels()
	key, guid, version := l[names.LabelRouteKey], l[names.LabelGUID], l[names.LabelVersion]
	if key == "" || guid == "" || version == "" {
		return ""
	}
	return key + "/" + store.LRPRef{GUID: guid, Version: version}.LRPKey()
}

// slicesOf are the cached EndpointSlices of lrpKey's instances for route key, by name.
func (in *informed) slicesOf(key, lrpKey string) map[string]*discoveryv1.EndpointSlice {
	return indexed[*discoveryv1.EndpointSlice](in.slices, byCarrier, key+"/"+lrpKey)
}

// keys are the route keys the objects name.
func (in *informed) keys() []string {
	out := append(in.services.GetIndexer().ListIndexFuncValues(byRouteKey), in.slices.GetIndexer().ListIndexFuncValues(byRouteKey)...)
	for _, obj := range in.routes.GetStore().List() {
		if key, _ := routeKeyOf(obj); len(key) > 0 {
			out = append(out, key...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ofKey are inf's cached objects of route key by name, as T.
func ofKey[T metav1.Object](inf cache.SharedIndexInformer, key string) map[string]T {
	return indexed[T](inf, byRouteKey, key)
}

// indexed are inf's cached objects whose index has value, by name, as T.
func indexed[T metav1.Object](inf cache.SharedIndexInformer, index, value string) map[string]T {
	objs, _ := inf.GetIndexer().ByIndex(index, value)
	out := make(map[string]T, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out[t.GetName()] = t
		}
	}
	return out
}

// routeOf is route key's cached Ingress or HTTPRoute, by name, as T: none or one.
func routeOf[T metav1.Object](in *informed, key string) map[string]T {
	name := names.RouteObjectName(key)
	out := map[string]T{}
	if obj, exists, _ := in.routes.GetStore().GetByKey(cache.NewObjectName(in.namespace, name).String()); exists {
		if t, ok := obj.(T); ok {
			out[name] = t
		}
	}
	return out
}

// have are the cached route objects of key.
type have struct {
	services   map[string]*corev1.Service
	slices     map[string]*discoveryv1.EndpointSlice
	ingresses  map[string]*networkingv1.Ingress
	httpRoutes map[string]*gatewayv1.HTTPRoute
}

func (in *informed) of(key string) have {
	return have{
		services:   ofKey[*corev1.Service](in.services, key),
		slices:     ofKey[*discoveryv1.EndpointSlice](in.slices, key),
		ingresses:  routeOf[*networkingv1.Ingress](in, key),
		httpRoutes: routeOf[*gatewayv1.HTTPRoute](in, key),
	}
}
