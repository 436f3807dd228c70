package lrp_test

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("ListLRPs", func() {
	var (
		ctx     context.Context
		client  *fake.Clientset
		backend *k8s.Backend
		lrps    []*opi.LRP
	)

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		backend = backendtest.StartBackend(client)
		lrps = nil
		for i := range 3 {
			lrp := backendtest.SampleLRP()
			lrp.GUID = fmt.Sprintf("%08d-0d35-4ad7-a6d3-2c0ef0d3bb2a", i)
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			lrps = append(lrps, lrp)
		}
	})

	list := func() []*opi.LRP {
		got, err := backend.ListLRPs(ctx)
		Expect(err).NotTo(HaveOccurred())
		return got
	}
	instances := func(got []*opi.LRP) []int32 {
		var out []int32
		for _, l := range got {
			out = append(out, l.Instances)
		}
		return out
	}

	It("lists in guid order, the same list at the same version while nothing changed", func() {
		first, version, err := backend.ListLRPsVersioned(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(first).To(HaveLen(3))
		Expect(first[0].GUID < first[1].GUID && first[1].GUID < first[2].GUID).To(BeTrue())
		second, again, err := backend.ListLRPsVersioned(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(again).To(Equal(version))
		Expect(second).To(Equal(first))
	})

	It("builds each list anew: nothing a caller does to one shows in the next", func() {
		first := list()
		first[0].Instances = 99
		first[1] = nil
		got := list()
		Expect(got).To(HaveLen(3))
		Expect(instances(got)).To(Equal([]int32{2, 2, 2}))
	})

	It("builds it again after an update, a desire and a stop", func() {
		Expect(instances(list())).To(Equal([]int32{2, 2, 2}))

		Expect(backend.UpdateLRP(ctx, lrps[1].LRPIdentifier, opi.LRPUpdate{Instances: ptr.To(int32(5))})).To(Succeed())
		Expect(instances(list())).To(Equal([]int32{2, 5, 2}))

		Expect(backend.UpdateLRP(ctx, lrps[2].LRPIdentifier, opi.LRPUpdate{Annotation: ptr.To("2.0")})).To(Succeed())
		Expect(list()[2].LastUpdated).To(Equal("2.0"))

		extra := backendtest.SampleLRP()
		extra.GUID = "00000009-0d35-4ad7-a6d3-2c0ef0d3bb2a"
		Expect(backend.DesireLRP(ctx, extra)).To(Succeed())
		Expect(list()).To(HaveLen(4))

		Expect(backend.StopLRP(ctx, lrps[0].LRPIdentifier)).To(Succeed())
		got := list()
		Expect(got).To(HaveLen(3))
		Expect(got[0].GUID).NotTo(Equal(lrps[0].GUID))
	})

	It("drops a Deployment being deleted at once", func() {
		list()
		d := backendtest.GetDeployment(client, names.DeploymentName(lrps[0]))
		now := metav1.Now()
		d.DeletionTimestamp = &now
		_, err := client.AppsV1().Deployments(backendtest.Namespace).Update(ctx, d, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() int { return len(list()) }).Should(Equal(2))
	})
})
