package routeobjects

import (
	"context"
	"fmt"
	"maps"

	"code.cloudfoundry.org/lager/v3"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/names"
)

// sync brings route key's objects in line with what its carriers' caches say, in an order that
// never leaves the route pointing nowhere: new Services, then the EndpointSlices, then the
// Ingress or HTTPRoute (which names only Services that exist; with no carrier left, it goes),
// then the slices and Services nothing names any more.
func (c *Controller) sync(ctx context.Context, key string) error {
	defer c.lockKey(key, true)()
	space, host, lrps := c.carriers(key)
	want := c.desired(key, space, host, lrps)
	have := c.objects.of(key)

	services, err := c.services().ensure(ctx, mapValues(want.services), have.services)
	if err != nil {
		return err
	}
	var slices []*discoveryv1.EndpointSlice
	for name, list := range want.slices {
		svc := services[name]
		for _, s := range list {
			s.OwnerReferences = []metav1.OwnerReference{kube.ControllerRef(svc, "v1", "Service")}
			slices = append(slices, s)
		}
	}
	if _, err := c.slices().ensure(ctx, slices, have.slices); err != nil {
		return err
	}
	if c.cfg.Routing.Mode == hooks.RoutingGateway {
		var routes []*gatewayv1.HTTPRoute
		if want.httpRoute != nil {
			routes = append(routes, want.httpRoute)
		}
		if err := c.httpRoutes().apply(ctx, routes, have.httpRoutes); err != nil {
			return err
		}
	} else {
		var ingresses []*networkingv1.Ingress
		if want.ingress != nil {
			ingresses = append(ingresses, want.ingress)
		}
		if err := c.ingresses().apply(ctx, ingresses, have.ingresses); err != nil {
			return err
		}
	}
	if err := c.slices().prune(ctx, slices, have.slices); err != nil {
		return err
	}
	return c.services().prune(ctx, mapValues(want.services), have.services)
}

// syncSlices brings lrpKey's EndpointSlices of route key in line with its cached workload and
// pods: created or updated while it carries the key, deleted when it no longer does. The
// route's Services stay as they are; when one the LRP needs is not there yet, the whole route
// is synced instead.
func (c *Controller) syncSlices(ctx context.Context, key, lrpKey string) error {
	unlock := c.lockKey(key, false)
	space, host, carries := c.carrierOf(key, lrpKey)
	var want []*discoveryv1.EndpointSlice
	if w := c.carrying(lrpKey, space); carries && w != nil {
		services := ofKey[*corev1.Service](c.objects.services, key)
		for _, p := range pathsOf(w, host) {
			name := names.RouteServiceName(key, p.path)
			svc, ok := latest(c.objects.servicesWritten, name, services)
			if !ok {
				unlock()
				return c.sync(ctx, key)
			}
			for _, s := range c.endpointSlices(key, name, carrier{w: w, port: p.port}) {
				s.OwnerReferences = []metav1.OwnerReference{kube.ControllerRef(svc, "v1", "Service")}
				want = append(want, s)
			}
		}
	}
	defer unlock()
	have := c.objects.slicesOf(key, lrpKey)
	if _, err := c.slices().ensure(ctx, want, have); err != nil {
		return err
	}
	return c.slices().prune(ctx, want, have)
}

// refusedAsBehind says whether err is a write refused as if the cache were behind the API
// server: a create of an object that exists, an update of an older version than the stored one.
// Mostly the cache has not seen another's write yet (this term's stand in until their events),
// and the informer's event of it queues the sync again; but an object of the same name that is
// not opi's (no route labels, so never cached) refuses every create and brings no event.
func refusedAsBehind(err error) bool {
	return apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err)
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// client is what a route object's typed client does for the controller.
type client[T metav1.Object] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// kind writes one kind of route object: created when missing, updated where the fields opi
// sets differ, deleted when no longer wanted.
type kind[T metav1.Object] struct {
	name   string
	client client[T]
	logger lager.Logger
	// written are the objects of the kind written whose event has not come yet.
	written *recent
	// differs says whether have's content (spec, endpoints) is not want's; set copies want's
	// content into have (a copy).
	differs func(have, want T) bool
	set     func(have, want T)
	copy    func(T) T
}

// ensure creates or updates want's objects against have (the cache's, by name, where an
// object this term wrote stands in until its event); it returns the objects as written or
// cached, by name.
func (k kind[T]) ensure(ctx context.Context, want []T, have map[string]T) (map[string]T, error) {
	out := make(map[string]T, len(want))
	for _, w := range want {
		h, ok := latest(k.written, w.GetName(), have)
		if !ok {
			k.written.writing(w.GetName())
			created, err := k.client.Create(ctx, w, metav1.CreateOptions{})
			if err != nil {
				k.written.wrote(w.GetName(), nil)
				return nil, fmt.Errorf("create %s %s: %w", k.name, w.GetName(), err)
			}
			k.logger.Debug("created", lager.Data{k.name: w.GetName()})
			out[w.GetName()] = k.keep(created)
			continue
		}
		if !metaDiffers(h, w) && !k.differs(h, w) {
			out[w.GetName()] = h
			continue
		}
		next := k.copy(h)
		setMeta(next, w)
		k.set(next, w)
		k.written.writing(w.GetName())
		updated, err := k.client.Update(ctx, next, metav1.UpdateOptions{})
		if err != nil {
			k.written.wrote(w.GetName(), nil)
			return nil, fmt.Errorf("update %s %s: %w", k.name, w.GetName(), err)
		}
		out[w.GetName()] = k.keep(updated)
	}
	return out, nil
}

// keep is obj, as the API server answered a write of it, without its managed fields (an update
// made from it must not send them: they would replace the stored ones), kept in written until
// its event.
func (k kind[T]) keep(obj T) T {
	obj.SetManagedFields(nil)
	k.written.wrote(obj.GetName(), obj)
	return obj
}

// apply ensures want and prunes the rest of have.
func (k kind[T]) apply(ctx context.Context, want []T, have map[string]T) error {
	if _, err := k.ensure(ctx, want, have); err != nil {
		return err
	}
	return k.prune(ctx, want, have)
}

// prune deletes have's objects that are not among wanted, each only if it is unchanged since
// the cache saw it or this term wrote it (a change brings a new look).
func (k kind[T]) prune(ctx context.Context, wanted []T, have map[string]T) error {
	names := map[string]bool{}
	for _, w := range wanted {
		names[w.GetName()] = true
	}
	for name := range have {
		if names[name] {
			continue
		}
		h, _ := latest(k.written, name, have)
		if err := kube.DeleteAsListed(ctx, k.client.Delete, h); err != nil {
			return fmt.Errorf("delete %s %s: %w", k.name, name, err)
		}
		k.logger.Debug("deleted", lager.Data{k.name: name})
	}
	return nil
}

// metaDiffers says whether have lacks one of want's labels, annotations or owners.
func metaDiffers(have, want metav1.Object) bool {
	for k, v := range want.GetLabels() {
		if have.GetLabels()[k] != v {
			return true
		}
	}
	for k, v := range want.GetAnnotations() {
		if have.GetAnnotations()[k] != v {
			return true
		}
	}
	return len(want.GetOwnerReferences()) > 0 && !equality.Semantic.DeepEqual(have.GetOwnerReferences(), want.GetOwnerReferences())
}

// setMeta gives have want's labels, annotations and owners, keeping labels and annotations of
// others.
func setMeta(have, want metav1.Object) {
	labels := maps.Clone(have.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, want.GetLabels())
	have.SetLabels(labels)
	if len(want.GetAnnotations()) > 0 {
		ann := maps.Clone(have.GetAnnotations())
		if ann == nil {
			ann = map[string]string{}
		}
		maps.Copy(ann, want.GetAnnotations())
		have.SetAnnotations(ann)
	}
	if len(want.GetOwnerReferences()) > 0 {
		have.SetOwnerReferences(want.GetOwnerReferences())
	}
}

func (c *Controller) services() kind[*corev1.Service] {
	return kind[*corev1.Service]{
		name: "service", client: c.client.CoreV1().Services(c.cfg.Namespace), logger: c.logger, written: c.objects.servicesWritten,
		differs: func(have, want *corev1.Service) bool {
			return have.Spec.Selector != nil || !equality.Semantic.DeepEqual(have.Spec.Ports, want.Spec.Ports)
		},
		set: func(have, want *corev1.Service) {
			have.Spec.Selector, have.Spec.Ports = nil, want.Spec.Ports
		},
		copy: (*corev1.Service).DeepCopy,
	}
}

func (c *Controller) slices() kind[*discoveryv1.EndpointSlice] {
	return kind[*discoveryv1.EndpointSlice]{
		name: "endpointslice", client: c.client.DiscoveryV1().EndpointSlices(c.cfg.Namespace), logger: c.logger, written: c.objects.slicesWritten,
		differs: func(have, want *discoveryv1.EndpointSlice) bool {
			return have.AddressType != want.AddressType || !equality.Semantic.DeepEqual(have.Ports, want.Ports) ||
				!equality.Semantic.DeepEqual(have.Endpoints, want.Endpoints)
		},
		set: func(have, want *discoveryv1.EndpointSlice) {
			have.AddressType, have.Ports, have.Endpoints = want.AddressType, want.Ports, want.Endpoints
		},
		copy: (*discoveryv1.EndpointSlice).DeepCopy,
	}
}

func (c *Controller) ingresses() kind[*networkingv1.Ingress] {
	return specKind(c.logger, c.objects.routesWritten, "ingress", c.client.NetworkingV1().Ingresses(c.cfg.Namespace),
		func(o *networkingv1.Ingress) *networkingv1.IngressSpec { return &o.Spec })
}

func (c *Controller) httpRoutes() kind[*gatewayv1.HTTPRoute] {
	return specKind(c.logger, c.objects.routesWritten, "httproute", c.gateway.GatewayV1().HTTPRoutes(c.cfg.Namespace),
		func(o *gatewayv1.HTTPRoute) *gatewayv1.HTTPRouteSpec { return &o.Spec })
}

// specKind is the kind of a route object whose content opi sets is its whole spec, which spec
// points at: an Ingress or an HTTPRoute.
func specKind[T interface {
	metav1.Object
	DeepCopy() T
}, S any](logger lager.Logger, written *recent, name string, cl client[T], spec func(T) *S) kind[T] {
	return kind[T]{
		name: name, client: cl, logger: logger, written: written,
		differs: func(have, want T) bool { return !equality.Semantic.DeepEqual(*spec(have), *spec(want)) },
		set:     func(have, want T) { *spec(have) = *spec(want) },
		copy:    T.DeepCopy,
	}
}
