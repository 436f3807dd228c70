package main

import (
	"context"
	"errors"
	"github.com/opi-bridge/opi/k8s"

	"code.cloudfoundry.org/lager/v3"
	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

// The Gateway API client is made whenever the cluster serves HTTPRoutes, so that the janitor
// of the other modes removes the HTTPRoutes a gateway mode left (k8s/internal/janitor's modes specs).
var _ = Describe("The Gateway API client", func() {
	var (
		client *fake.Clientset
		logger *lagertest.TestLogger
	)
	restConfig := &rest.Config{Host: "https://127.0.0.1:6443"}
	serve := func(resources ...string) {
		list := &metav1.APIResourceList{GroupVersion: "gateway.networking.k8s.io/v1"}
		for _, r := range resources {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: r, Namespaced: true})
		}
		client.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{list}
	}

	BeforeEach(func() {
		client = fake.NewClientset()
		logger = lagertest.NewTestLogger("opi")
	})

	DescribeTable("is made in every routing mode when the cluster serves HTTPRoutes",
		func(mode string) {
			serve("gateways", "httproutes")
			gw, err := gatewayClient(context.Background(), mode, client.Discovery(), restConfig, logger)
			Expect(err).NotTo(HaveOccurred())
			Expect(gw).NotTo(BeNil())
			Expect(logger.LogMessages()).To(BeEmpty())
		},
		Entry("ingress", k8s.RoutingIngress),
		Entry("nats", k8s.RoutingNATS),
		Entry("none", k8s.RoutingNone),
		Entry("gateway", k8s.RoutingGateway),
	)

	DescribeTable("is not made outside gateway mode when the cluster does not serve HTTPRoutes, and nothing is logged",
		func(resources []string) {
			if resources != nil {
				serve(resources...)
			}
			gw, err := gatewayClient(context.Background(), k8s.RoutingNATS, client.Discovery(), restConfig, logger)
			Expect(err).NotTo(HaveOccurred())
			Expect(gw).To(BeNil())
			Expect(logger.LogMessages()).To(BeEmpty())
		},
		Entry("no Gateway API at all", nil),
		Entry("the group without HTTPRoutes", []string{"gateways", "gatewayclasses"}),
	)

	It("is made in gateway mode without asking the cluster (the routing hook checks HTTPRoutes at start)", func() {
		gw, err := gatewayClient(context.Background(), k8s.RoutingGateway, client.Discovery(), restConfig, logger)
		Expect(err).NotTo(HaveOccurred())
		Expect(gw).NotTo(BeNil())
		Expect(client.Actions()).To(BeEmpty())
	})

	It("is not made when discovery fails, which is logged as information, not as an error", func() {
		serve("httproutes")
		client.PrependReactor("get", "resource", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("connection refused")
		})
		gw, err := gatewayClient(context.Background(), k8s.RoutingIngress, client.Discovery(), restConfig, logger)
		Expect(err).NotTo(HaveOccurred())
		Expect(gw).To(BeNil())
		Expect(logger.Logs()).To(HaveLen(1))
		Expect(logger.Logs()[0].Message).To(Equal("opi.httproutes-unknown"))
		Expect(logger.Logs()[0].LogLevel).To(Equal(lager.INFO))
	})
})
