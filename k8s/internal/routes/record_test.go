package routes_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/gorouter"
	"github.com/opi-bridge/opi/k8s/internal/routes"
	"github.com/opi-bridge/opi/testsupport/fakekube"
)

var _ = Describe("ConfigMapRecords", func() {
	const ns = "cf-workloads"
	lrpKey := "b7a3c2d0-6a3c-4bcd-9e55-3d2f1c0a9b8e/v1"
	reg := gorouter.Registration{Host: "10.0.0.1", Port: 8080, URIs: []string{"dora.example.com"}, App: "app-guid",
		PrivateInstanceID: "uid-p0", PrivateInstanceIndex: "0"}

	It("keeps one ConfigMap per LRP, without owner, created, replaced and deleted with its last endpoint", func() {
		ctx := context.Background()
		client := fakekube.NewClientset()
		records := routes.ConfigMapRecords{Client: client, Namespace: ns}

		Expect(records.Save(ctx, lrpKey, []gorouter.Registration{reg}, false)).To(Succeed())
		other := reg
		other.Host = "10.0.0.2"
		Expect(records.Save(ctx, lrpKey, []gorouter.Registration{reg, other}, true)).To(Succeed())
		Expect(fakekube.ActionsSince(client, 0)).To(Equal([]string{
			"create configmaps " + routes.RecordName(lrpKey),
			"update configmaps " + routes.RecordName(lrpKey),
		}), "one call each")
		cm, err := client.CoreV1().ConfigMaps(ns).Get(ctx, routes.RecordName(lrpKey), metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(cm.OwnerReferences).To(BeEmpty(), "it outlives the workload")
		Expect(cm.Labels).To(HaveKeyWithValue(routes.LabelRecord, "true"))

		Expect(records.Load(ctx)).To(Equal(map[string][]gorouter.Registration{lrpKey: {reg, other}}))

		Expect(records.Save(ctx, lrpKey, nil, true)).To(Succeed())
		Expect(records.Load(ctx)).To(BeEmpty())
		Expect(records.Save(ctx, lrpKey, nil, true)).To(Succeed(), "already gone")
	})

	It("falls back to the other call when the caller's guess is wrong", func() {
		ctx := context.Background()
		client := fakekube.NewClientset()
		records := routes.ConfigMapRecords{Client: client, Namespace: ns}

		Expect(records.Save(ctx, lrpKey, []gorouter.Registration{reg}, true)).To(Succeed(), "not there yet")
		other := reg
		other.Host = "10.0.0.2"
		Expect(records.Save(ctx, lrpKey, []gorouter.Registration{other}, false)).To(Succeed(), "there already")
		Expect(fakekube.ActionsSince(client, 0)).To(Equal([]string{
			"update configmaps " + routes.RecordName(lrpKey),
			"create configmaps " + routes.RecordName(lrpKey),
			"create configmaps " + routes.RecordName(lrpKey),
			"update configmaps " + routes.RecordName(lrpKey),
		}))
		Expect(records.Load(ctx)).To(Equal(map[string][]gorouter.Registration{lrpKey: {other}}))
	})
})
