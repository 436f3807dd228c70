package janitor_test

import (
	"context"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/janitor"
	"github.com/opi-bridge/opi/k8s/internal/janitor/janitorfakes"
	"github.com/opi-bridge/opi/k8s/internal/workload"
	"github.com/opi-bridge/opi/k8s/names"
)

// An operator switching an existing foundation's routing mode: the janitor removes the other
// modes' objects of opi's LRPs (still controlled by their workloads), and nothing else.
var _ = Describe("Janitor after a switch of routing mode", func() {
	const namespace = "apps"
	var (
		ctx    context.Context
		client *fake.Clientset
		gw     *gatewayfake.Clientset
		lists  []string
	)
	opiLabels := map[string]string{names.LabelGUID: "guid-1", names.LabelVersion: "v1", names.LabelSourceType: names.SourceTypeApp}
	otherLabels := map[string]string{"app": "not-opi"}
	routeLabels := map[string]string{names.LabelSourceType: names.SourceTypeRoute, names.LabelRouteKey: "0123456789abcdef"}
	owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "app-a", UID: "uid-d", Controller: ptr.To(true)}

	meta := func(name string, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: name, Namespace: namespace, Labels: labels, UID: types.UID("uid-" + name), ResourceVersion: "7",
			CreationTimestamp: metav1.NewTime(time.Now()), OwnerReferences: []metav1.OwnerReference{owner},
		}
	}
	sweep := func(routing string, withGateway bool) {
		var gwClient gateway.Interface
		if withGateway {
			gwClient = gw
		}
		cache := new(janitorfakes.FakeCache)
		j, err := janitor.New(lagertest.NewTestLogger("janitor"), janitor.Config{Namespace: namespace, Options: janitor.Options{Routing: routing}}, janitor.Deps{
			Client:  client,
			Gateway: gwClient,
			Kind:    workload.New(workload.Deployments, workload.Config{Apps: client.AppsV1(), Namespace: namespace}),
			Cache:   cache,
			Lists: func(resource schema.GroupVersionResource) hooks.MetadataList {
				lists = append(lists, resource.Resource)
				return hooks.NewMetadataLists(nil, client, gwClient, namespace)(resource)
			},
		})
		Expect(err).NotTo(HaveOccurred())
		j.Sweep(ctx)
	}
	objectNames := func() (services, ingresses, httproutes []string) {
		s, err := client.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		for _, o := range s.Items {
			services = append(services, o.Name)
		}
		i, err := client.NetworkingV1().Ingresses(namespace).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		for _, o := range i.Items {
			ingresses = append(ingresses, o.Name)
		}
		r, err := gw.GatewayV1().HTTPRoutes(namespace).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		for _, o := range r.Items {
			httproutes = append(httproutes, o.Name)
		}
		return services, ingresses, httproutes
	}

	BeforeEach(func() {
		ctx = context.Background()
		lists = nil
		client = fake.NewClientset(
			&corev1.Service{ObjectMeta: meta("opi-svc", opiLabels)},
			&corev1.Service{ObjectMeta: meta("other-svc", otherLabels)},
			&networkingv1.Ingress{ObjectMeta: meta("opi-ing", opiLabels)},
			&networkingv1.Ingress{ObjectMeta: meta("other-ing", otherLabels)},
			&corev1.Service{ObjectMeta: meta("route-svc", routeLabels)},
			&networkingv1.Ingress{ObjectMeta: meta("route-ing", routeLabels)},
		)
		gw = gatewayfake.NewClientset(
			&gatewayv1.HTTPRoute{ObjectMeta: meta("opi-route", opiLabels)},
			&gatewayv1.HTTPRoute{ObjectMeta: meta("other-route", otherLabels)},
			&gatewayv1.HTTPRoute{ObjectMeta: meta("route-route", routeLabels)},
		)
	})

	DescribeTable("deletes exactly the objects of opi that its mode does not make, and every LRP's own Ingress and HTTPRoute",
		func(routing string, wantServices, wantIngresses, wantRoutes []string, wantLists []string) {
			sweep(routing, true)

			services, ingresses, routes := objectNames()
			Expect(services).To(ConsistOf(wantServices))
			Expect(ingresses).To(ConsistOf(wantIngresses))
			Expect(routes).To(ConsistOf(wantRoutes))
			Expect(lists).To(Equal(wantLists))
		},
		Entry("nats: the LRPs' Services, Ingresses and HTTPRoutes, and the route objects", hooks.RoutingNATS,
			[]string{"other-svc"}, []string{"other-ing"}, []string{"other-route"},
			[]string{"secrets", "services", "services", "services", "ingresses", "ingresses", "httproutes", "httproutes"}),
		Entry("ingress: the LRPs' Ingresses and HTTPRoutes, the route HTTPRoutes", hooks.RoutingIngress,
			[]string{"opi-svc", "other-svc", "route-svc"}, []string{"other-ing", "route-ing"}, []string{"other-route"},
			[]string{"secrets", "services", "ingresses", "httproutes", "httproutes"}),
		Entry("gateway: the LRPs' Ingresses and HTTPRoutes, the route Ingresses", hooks.RoutingGateway,
			[]string{"opi-svc", "other-svc", "route-svc"}, []string{"other-ing"}, []string{"other-route", "route-route"},
			[]string{"secrets", "services", "ingresses", "ingresses", "httproutes"}),
		Entry("none: nothing", hooks.RoutingNone,
			[]string{"opi-svc", "other-svc", "route-svc"}, []string{"opi-ing", "other-ing", "route-ing"}, []string{"opi-route", "other-route", "route-route"},
			[]string{"secrets", "services"}),
	)

	It("lists opi's objects by its labels and deletes each only as listed (uid and resource version)", func() {
		sweep(hooks.RoutingNATS, true)

		var deletes []metav1.DeleteOptions
		for _, a := range append(client.Actions(), gw.Actions()...) {
			if d, ok := a.(k8stesting.DeleteAction); ok {
				deletes = append(deletes, d.GetDeleteOptions())
			}
			if l, ok := a.(k8stesting.ListAction); ok {
				Expect(l.GetListRestrictions().Labels.String()).To(BeElementOf(names.AppSelector, names.RouteSelector))
			}
		}
		Expect(deletes).To(HaveLen(6))
		for _, d := range deletes {
			Expect(d.Preconditions).NotTo(BeNil())
			Expect(d.Preconditions.ResourceVersion).To(Equal(ptr.To("7")))
			Expect(d.Preconditions.UID).NotTo(BeNil())
		}
	})

	It("does not look for HTTPRoutes without a Gateway API client", func() {
		sweep(hooks.RoutingNATS, false)

		Expect(lists).NotTo(ContainElement("httproutes"))
		Expect(gw.Actions()).To(BeEmpty())
		services, ingresses, routes := objectNames()
		Expect(services).To(ConsistOf("other-svc"))
		Expect(ingresses).To(ConsistOf("other-ing"))
		Expect(routes).To(ConsistOf("opi-route", "other-route", "route-route"))
	})
})
