package main

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

var _ = Describe("the same-objects floor's template", func() {
	It("reads opi's routing mode from -opi-args, opi's default (ingress) when none is given", func() {
		Expect(routingOf("")).To(Equal(""))
		Expect(routingOf("--headless-services --routing=none")).To(Equal("none"))
		Expect(routingOf("--routing gateway --gateway-name=bench")).To(Equal("gateway"))
		Expect(config{}.routingMode()).To(Equal(""))
		Expect(config{opiArgs: "--routing=gateway"}.routingMode()).To(Equal("gateway"))
		Expect(config{routing: routingNATS}.routingMode()).To(Equal(routingNATS), "-routing nats adds opi's flag itself")
		Expect(makesRouteObjects("")).To(BeTrue())
		Expect(makesRouteObjects("gateway")).To(BeTrue())
		Expect(makesRouteObjects("none")).To(BeFalse())
		Expect(makesRouteObjects(routingNATS)).To(BeFalse())
	})

	It("gives each app its own copy of a route EndpointSlice, controlled by the app's workload", func() {
		tmplApp := app{guid: "11111111-aaaa", version: "22222222-bbbb"}
		slice := `{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"opi-route-abc-0d68b5cd-0",` +
			`"labels":{"opi-bridge.io/guid":"11111111-aaaa","opi-bridge.io/version":"22222222-bbbb"},` +
			`"ownerReferences":[{"apiVersion":"v1","kind":"Service","name":"opi-route-abc","uid":"svc-uid","controller":true}]},` +
			`"addressType":"IPv4","endpoints":[]}`
		deployment := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
		t := &template{app: tmplApp, name: tmplApp.deploymentName(),
			workload: tmplObject{gvk: deployment, json: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"` + tmplApp.deploymentName() + `"}}`},
			others:   []tmplObject{{gvk: discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"), json: slice, sharedName: true}},
		}
		a, b := newApp(), newApp()
		_, ofA, err := t.objects(a, "floor")
		Expect(err).NotTo(HaveOccurred())
		_, ofB, err := t.objects(b, "floor")
		Expect(err).NotTo(HaveOccurred())
		sa, sb := ofA[0].obj.(*discoveryv1.EndpointSlice), ofB[0].obj.(*discoveryv1.EndpointSlice)
		Expect(sa.Name).NotTo(Equal(sb.Name))
		Expect(sa.Labels).To(HaveKeyWithValue("opi-bridge.io/guid", a.guid))

		Expect(ownBy(ofA[0], deployment, "app-a", types.UID("deployment-uid"))).To(Succeed())
		Expect(sa.OwnerReferences).To(Equal([]metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "Deployment", Name: "app-a", UID: "deployment-uid", Controller: ptr.To(true),
		}}))
	})
})
