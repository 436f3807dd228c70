package cluster_test

import (
	"context"
	"errors"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opi-bridge/opi/k8s/internal/cluster"
)

var _ = Describe("Discover", func() {
	var (
		client *fake.Clientset
		logger *lagertest.TestLogger
	)

	BeforeEach(func() {
		client = fake.NewClientset()
		client.Resources = []*metav1.APIResourceList{{GroupVersion: "networking.k8s.io/v1"}, {GroupVersion: "apps/v1"}}
		logger = lagertest.NewTestLogger("test")
	})

	probe := func(err error) {
		client.PrependReactor("create", "deployments", func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, a.(k8stesting.CreateAction).GetObject(), err
		})
	}

	It("finds relaxed env names when a dry run accepts one, and the API groups", func() {
		probe(nil)
		rules := cluster.Discover(context.Background(), client, namespace, logger)
		Expect(rules.RelaxedEnvNames).To(BeTrue())
		Expect(rules.EnvNamesProbed).To(BeTrue())
		Expect(rules.Ingress).To(BeTrue())
		Expect(rules.HTTPRoute).To(BeFalse())

		var creates []k8stesting.CreateActionImpl
		for _, a := range client.Actions() {
			if c, ok := a.(k8stesting.CreateActionImpl); ok {
				creates = append(creates, c)
			}
		}
		Expect(creates).To(HaveLen(1))
		Expect(creates[0].GetCreateOptions().DryRun).To(Equal([]string{metav1.DryRunAll}), "the probe must store nothing")
		d := creates[0].GetObject().(*appsv1.Deployment)
		Expect(d.Namespace).To(Equal(namespace))
		Expect(d.Spec.Template.Spec.Containers[0].Env[0].Name).To(ContainSubstring(":"))
		Expect(logger.Buffer()).To(gbytes.Say(`"env-names":"relaxed"`))
	})

	It("finds strict env names when the dry run refuses the name", func() {
		probe(apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "opi-env-name-probe", field.ErrorList{
			field.Invalid(field.NewPath("spec", "template", "spec", "containers").Index(0).Child("env").Index(0).Child("name"), "opi:probe", "a valid environment variable name must consist of"),
		}))
		rules := cluster.Discover(context.Background(), client, namespace, logger)
		Expect(rules.RelaxedEnvNames).To(BeFalse())
		Expect(rules.EnvNamesProbed).To(BeTrue())
		Expect(logger.Buffer()).To(gbytes.Say(`"env-names":"strict"`))
	})

	It("assumes strict env names, and says so, when the probe cannot tell", func() {
		probe(apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "x", errors.New("no create")))
		rules := cluster.Discover(context.Background(), client, namespace, logger)
		Expect(rules.RelaxedEnvNames).To(BeFalse())
		Expect(rules.EnvNamesProbed).To(BeFalse())
		Expect(logger.Buffer()).To(gbytes.Say(`env-name-probe-failed.*"assuming":"strict"`))
	})
})
