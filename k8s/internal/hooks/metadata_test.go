package hooks_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
)

var _ = Describe("NewMetadataLists", func() {
	ctx := context.Background()
	selector := metav1.ListOptions{LabelSelector: "opi-bridge.io/source-type=APP"}
	// objectMeta is a listed object's metadata: labels, an owner, a uid, a creation time.
	objectMeta := func(name, ns string, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: name, Namespace: ns, UID: types.UID("uid-" + name), Labels: labels,
			Annotations:       map[string]string{"opi-bridge.io/process-guid": "guid-" + name},
			CreationTimestamp: metav1.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "Deployment", Name: "app-" + name, UID: types.UID("owner-" + name),
			}},
		}
	}
	app := map[string]string{"opi-bridge.io/source-type": "APP"}
	other := map[string]string{"opi-bridge.io/source-type": "TASK"}

	Describe("without a metadata client, over the typed clients", func() {
		It("lists exactly the selected objects' metadata, and none of the Secrets' data", func() {
			secret := func(m metav1.ObjectMeta) *corev1.Secret {
				return &corev1.Secret{ObjectMeta: m, Data: map[string][]byte{"PASSWORD": []byte("s3cret")}, StringData: map[string]string{"TOKEN": "t0ken"}}
			}
			a, b := objectMeta("a-env", namespace, app), objectMeta("b-env", namespace, app)
			client := fake.NewClientset(
				secret(a), secret(b),
				secret(objectMeta("task-env", namespace, other)),
				secret(objectMeta("elsewhere-env", "other-namespace", app)),
			)
			list, err := hooks.NewMetadataLists(nil, client, nil, namespace)(hooks.SecretsResource)(ctx, selector)
			Expect(err).NotTo(HaveOccurred())
			Expect(list.Items).To(ConsistOf(
				metav1.PartialObjectMetadata{ObjectMeta: a},
				metav1.PartialObjectMetadata{ObjectMeta: b},
			))
			Expect(list.Items).NotTo(ContainElement(WithTransform(func(p metav1.PartialObjectMetadata) string {
				return p.String()
			}, Or(ContainSubstring("s3cret"), ContainSubstring("t0ken")))), "no value of a Secret is in what is listed")

			Expect(client.Actions()).To(HaveLen(1))
			Expect(client.Actions()[0].GetVerb()).To(Equal("list"))
			Expect(client.Actions()[0].GetNamespace()).To(Equal(namespace))
			Expect(client.Actions()[0].(k8stesting.ListAction).GetListRestrictions().Labels.String()).To(Equal(selector.LabelSelector))
		})

		It("keeps the list's resource version and continue token, for paging", func() {
			client := fake.NewClientset()
			client.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, &corev1.SecretList{
					ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next-page"},
					Items:    []corev1.Secret{{ObjectMeta: objectMeta("a-env", namespace, app), Data: map[string][]byte{"K": []byte("v")}}},
				}, nil
			})
			list, err := hooks.NewMetadataLists(nil, client, nil, namespace)(hooks.SecretsResource)(ctx, selector)
			Expect(err).NotTo(HaveOccurred())
			Expect(list.ResourceVersion).To(Equal("42"))
			Expect(list.Continue).To(Equal("next-page"))
			Expect(list.Items).To(Equal([]metav1.PartialObjectMetadata{{ObjectMeta: objectMeta("a-env", namespace, app)}}))
		})

		DescribeTable("lists each of the hooks' resources with its own typed client",
			func(resource schema.GroupVersionResource, obj runtime.Object) {
				m := objectMeta("x", namespace, app)
				client := fake.NewClientset()
				gw := gatewayfake.NewClientset()
				if _, ok := obj.(*gatewayv1.HTTPRoute); ok {
					gw = gatewayfake.NewClientset(obj)
				} else {
					client = fake.NewClientset(obj)
				}
				list, err := hooks.NewMetadataLists(nil, client, gw, namespace)(resource)(ctx, selector)
				Expect(err).NotTo(HaveOccurred())
				Expect(list.Items).To(Equal([]metav1.PartialObjectMetadata{{ObjectMeta: m}}))
			},
			Entry("Services", hooks.ServicesResource, &corev1.Service{ObjectMeta: objectMeta("x", namespace, app)}),
			Entry("Ingresses", hooks.IngressesResource, &networkingv1.Ingress{ObjectMeta: objectMeta("x", namespace, app)}),
			Entry("NetworkPolicies", hooks.NetworkPoliciesResource, &networkingv1.NetworkPolicy{ObjectMeta: objectMeta("x", namespace, app)}),
			Entry("PodDisruptionBudgets", hooks.DisruptionBudgetsResource, &policyv1.PodDisruptionBudget{ObjectMeta: objectMeta("x", namespace, app)}),
			Entry("HTTPRoutes", hooks.HTTPRoutesResource, &gatewayv1.HTTPRoute{ObjectMeta: objectMeta("x", namespace, app)}),
		)

		It("says so when it has no client for a resource", func() {
			lists := hooks.NewMetadataLists(nil, fake.NewClientset(), nil, namespace)
			_, err := lists(hooks.HTTPRoutesResource)(ctx, selector)
			Expect(err).To(MatchError(ContainSubstring("list httproutes: no gateway api client")))
			_, err = lists(corev1.SchemeGroupVersion.WithResource("configmaps"))(ctx, selector)
			Expect(err).To(MatchError(ContainSubstring("no typed client for it")))
		})
	})

	It("with a metadata client, asks it (and not the typed clients) for the namespace's metadata", func() {
		client := fake.NewClientset()
		md := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
		m := objectMeta("a-env", namespace, app)
		md.PrependReactor("list", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, &metav1.List{Items: []runtime.RawExtension{{Object: &metav1.PartialObjectMetadata{ObjectMeta: m}}}}, nil
		})
		list, err := hooks.NewMetadataLists(md, client, nil, namespace)(hooks.SecretsResource)(ctx, selector)
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Items).To(Equal([]metav1.PartialObjectMetadata{{ObjectMeta: m}}))
		Expect(client.Actions()).To(BeEmpty())
		Expect(md.Actions()).To(HaveLen(1))
		Expect(md.Actions()[0].GetResource()).To(Equal(hooks.SecretsResource))
		Expect(md.Actions()[0].GetNamespace()).To(Equal(namespace))
	})
})
