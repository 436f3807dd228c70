package cluster_test

import (
	"context"

	"code.cloudfoundry.org/lager/v3"
	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opi-bridge/opi/k8s/internal/cluster"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("EnsureNamespace", func() {
	ctx := context.Background()
	var logger *lagertest.TestLogger
	BeforeEach(func() { logger = lagertest.NewTestLogger("ns") })
	opts := func(create bool) cluster.NamespaceOptions {
		return cluster.NamespaceOptions{Create: create, PodSecurity: objects.PodSecurityBaseline}
	}
	warnings := func() []lager.LogFormat {
		var out []lager.LogFormat
		for _, l := range logger.Logs() {
			if l.Message == "ns.namespace-pod-security" {
				out = append(out, l)
			}
		}
		return out
	}
	withLabels := func(labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps", Labels: labels}}
	}

	It("accepts an existing namespace that enforces the apps' pod security level, without a warning", func() {
		client := fake.NewClientset(withLabels(map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}))
		Expect(cluster.EnsureNamespace(ctx, client, "apps", opts(false), logger)).To(Succeed())
		Expect(actions(client)).To(Equal([]string{"get namespaces apps"}))
		Expect(logger.LogMessages()).To(BeEmpty())
	})

	It("creates a missing namespace when asked to, enforcing the apps' pod security level", func() {
		client := fake.NewClientset()
		Expect(cluster.EnsureNamespace(ctx, client, "apps", cluster.NamespaceOptions{Create: true, PodSecurity: objects.PodSecurityRestricted}, logger)).To(Succeed())
		Expect(actions(client)).To(Equal([]string{"get namespaces apps", "create namespaces apps"}))
		ns, err := client.CoreV1().Namespaces().Get(ctx, "apps", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(ns.Labels).To(Equal(map[string]string{
			"app.kubernetes.io/managed-by":               "opi",
			"pod-security.kubernetes.io/enforce":         "restricted",
			"pod-security.kubernetes.io/enforce-version": "latest",
		}))
		Expect(logger.LogMessages()).To(BeEmpty())
	})

	DescribeTable("warns at start-up about an existing namespace that does not enforce the level, and changes nothing",
		func(labels map[string]string, note string) {
			client := fake.NewClientset(withLabels(labels))
			Expect(cluster.EnsureNamespace(ctx, client, "apps", opts(true), logger)).To(Succeed())
			Expect(actions(client)).To(Equal([]string{"get namespaces apps"}))
			Expect(warnings()).To(HaveLen(1))
			Expect(warnings()[0].Data).To(HaveKeyWithValue("note", ContainSubstring(note)))
			Expect(warnings()[0].Data).To(HaveKeyWithValue("fix", "kubectl label namespace apps pod-security.kubernetes.io/enforce=baseline pod-security.kubernetes.io/enforce-version=latest --overwrite"))
		},
		Entry("no label", nil, "enforces no Pod Security Standard"),
		Entry("privileged", map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}, "weaker"),
		Entry("an unknown level", map[string]string{"pod-security.kubernetes.io/enforce": "lax"}, "weaker"),
		Entry("restricted, stricter than baseline", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}, "refuses the apps' pods"),
	)

	It("reports a missing namespace otherwise", func() {
		client := fake.NewClientset()
		err := cluster.EnsureNamespace(ctx, client, "apps", opts(false), logger)
		Expect(err).To(MatchError(ContainSubstring(`namespace "apps" does not exist`)))
		Expect(actions(client)).To(Equal([]string{"get namespaces apps"}))
	})

	It("reports a namespace it may not read", func() {
		client := fake.NewClientset()
		client.PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "apps", nil)
		})
		Expect(cluster.EnsureNamespace(ctx, client, "apps", opts(true), logger)).To(MatchError(ContainSubstring("not allowed to read")))
	})

	It("reports an unreachable API server as unavailable", func() {
		client := fake.NewClientset()
		client.PrependReactor("get", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, connectionRefused
		})
		Expect(cluster.EnsureNamespace(ctx, client, "apps", opts(true), logger)).To(MatchError(opi.ErrUnavailable))
	})
})
