package k8s_test

import (
	"context"
	"errors"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("A refused desire", func() {
	var (
		ctx     context.Context
		client  *fake.Clientset
		backend *k8s.Backend
		lrp     *opi.LRP
		name    string
		before  int
	)

	BeforeEach(func() {
		ctx = context.Background()
		client = newClient()
		backend = startBackend(client)
		lrp = sampleLRP()
		name = k8s.DeploymentName(lrp)
		before = len(client.Actions())
	})

	// refuse makes Kubernetes refuse every create of resource with err (as a webhook or a
	// quota would).
	refuse := func(resource string, err error) {
		client.PrependReactor("create", resource, func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, err
		})
	}
	quota := func(resource string) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: resource}, name, errors.New("exceeded quota: apps, requested: count/"+resource+"=1, used: 1, limited: 1"))
	}
	webhook := apierrors.NewInvalid(schema.GroupKind{Kind: "Service"}, "x", field.ErrorList{field.Invalid(field.NewPath("metadata", "labels"), "x", "denied by policy")})

	expectNothingLeft := func() {
		d, s, v := countObjects(client)
		ExpectWithOffset(1, [3]int{d, s, v}).To(Equal([3]int{0, 0, 0}), "deployments, secrets, services")
		lrps, err := backend.ListLRPs(ctx)
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		ExpectWithOffset(1, lrps).To(BeEmpty())
	}

	It("at the env secret writes nothing and answers why", func() {
		refuse("secrets", quota("secrets"))
		err := backend.DesireLRP(ctx, lrp)
		Expect(err).To(MatchError(opi.ErrInvalid))
		Expect(err.Error()).To(ContainSubstring("create env secret: invalid: "))
		Expect(err.Error()).To(ContainSubstring("exceeded quota"))
		Expect(actionsSince(client, before)).To(Equal([]string{"create secrets " + name + "-env"}))
		expectNothingLeft()
	})

	It("at the deployment removes the env secret it created, unless changed since", func() {
		refuse("deployments", quota("deployments"))
		err := backend.DesireLRP(ctx, lrp)
		Expect(err).To(MatchError(opi.ErrInvalid))
		Expect(err.Error()).To(ContainSubstring("create deployment: invalid: "))
		Expect(err.Error()).To(HaveSuffix("; removed what this desire had written (secret " + name + "-env)"))
		Expect(actionsSince(client, before)).To(Equal([]string{
			"create secrets " + name + "-env",
			"create deployments " + name,
			"delete secrets " + name + "-env",
		}))
		del := client.Actions()[len(client.Actions())-1].(k8stesting.DeleteAction)
		pre := del.GetDeleteOptions().Preconditions
		Expect(pre).NotTo(BeNil())
		Expect(pre.UID).NotTo(BeNil())
		Expect(pre.ResourceVersion).NotTo(BeNil(), "an unowned secret is deleted only as created")
		expectNothingLeft()
	})

	It("at the registry secret removes the env secret", func() {
		lrp.PrivateRegistry = &opi.PrivateRegistry{Username: "user", Password: "pw"}
		client.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if strings.HasSuffix(a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName(), "-registry") {
				return true, nil, quota("secrets")
			}
			return false, nil, nil
		})
		Expect(backend.DesireLRP(ctx, lrp)).To(MatchError(opi.ErrInvalid))
		Expect(actionsSince(client, before)).To(Equal([]string{
			"create secrets " + name + "-env",
			"create secrets " + name + "-registry",
			"delete secrets " + name + "-env",
		}))
		expectNothingLeft()
	})

	It("at the service removes the deployment and the secret it created", func() {
		refuse("services", webhook)
		err := backend.DesireLRP(ctx, lrp)
		Expect(err).To(MatchError(opi.ErrInvalid))
		Expect(err.Error()).To(ContainSubstring("create service: invalid: "))
		Expect(err.Error()).To(ContainSubstring("denied by policy"))
		Expect(err.Error()).To(HaveSuffix("(deployment " + name + ", secret " + name + "-env)"))
		Expect(actionsSince(client, before)).To(Equal([]string{
			"create secrets " + name + "-env",
			"create deployments " + name,
			"patch secrets " + name + "-env",
			"create services " + name,
			"delete deployments " + name,
			"delete secrets " + name + "-env",
		}))
		expectNothingLeft()
	})

	It("leaves an LRP that existed before as it was", func() {
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		Expect(client.CoreV1().Services(namespace).Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
		refuse("services", quota("services"))
		from := len(client.Actions())
		Expect(backend.DesireLRP(ctx, lrp)).To(MatchError(opi.ErrInvalid))
		for _, a := range actionsSince(client, from) {
			Expect(a).NotTo(HavePrefix("delete"))
		}
		getDeployment(client, name)
		getSecret(client, name+"-env")
	})

	It("is not undone when Kubernetes is only unavailable: a retry completes it", func() {
		refuse("deployments", apierrors.NewServiceUnavailable("etcd is down"))
		Expect(backend.DesireLRP(ctx, lrp)).To(MatchError(opi.ErrUnavailable))
		Expect(actionsSince(client, before)).To(Equal([]string{
			"create secrets " + name + "-env",
			"create deployments " + name,
		}))
		getSecret(client, name+"-env")
	})

	Describe("before the first write", func() {
		DescribeTable("refuses objects Kubernetes would refuse, with no API call",
			func(mutate func(*opi.LRP), message string) {
				mutate(lrp)
				err := backend.DesireLRP(ctx, lrp)
				Expect(err).To(MatchError(opi.ErrInvalid))
				Expect(err.Error()).To(ContainSubstring(message))
				Expect(actionsSince(client, before)).To(BeEmpty())
			},
			Entry("opi's annotations over 256 KiB (a huge app name)", func(l *opi.LRP) { l.AppName = strings.Repeat("a", 300<<10) },
				"the deployment "),
			Entry("a user annotation key Kubernetes refuses", func(l *opi.LRP) { l.UserDefinedAnnotations = map[string]string{"bad key!": "v"} },
				`spec.template.metadata.annotations: Invalid value: "bad key!"`),
			Entry("a label value Kubernetes refuses", func(l *opi.LRP) { l.GUID = "guid-ending-in-dash-" },
				"metadata.labels: Invalid value"),
			Entry("an env over a Secret's 1 MiB", func(l *opi.LRP) { l.Env = map[string]string{"BIG": strings.Repeat("x", 1<<20+1)} },
				"the secret "+"my-app-dev-"),
		)
	})
})

var _ = Describe("A refused update", func() {
	var (
		ctx     context.Context
		client  *fake.Clientset
		backend *k8s.Backend
		lrp     *opi.LRP
	)

	BeforeEach(func() {
		ctx = context.Background()
		client = newClient()
		backend = startBackend(client)
		lrp = sampleLRP()
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
	})

	It("is refused before the patch when opi's annotations would pass 256 KiB", func() {
		before := len(client.Actions())
		huge := strings.Repeat("1", 300<<10)
		err := backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Annotation: &huge})
		Expect(err).To(MatchError(opi.ErrInvalid))
		Expect(err.Error()).To(ContainSubstring("metadata.annotations: Too long"))
		Expect(actionsSince(client, before)).To(BeEmpty())
	})

	It("answers a 403 of Kubernetes as invalid, not as a failure", func() {
		client.PrependReactor("patch", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "x", errors.New("denied by webhook"))
		})
		three := int32(3)
		err := backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Instances: &three})
		Expect(err).To(MatchError(opi.ErrInvalid))
		Expect(err.Error()).To(ContainSubstring("denied by webhook"))
	})
})

var _ = Describe("A desire refused at the owner patch", func() {
	It("removes the deployment and the secret it created, and answers invalid", func() {
		ctx := context.Background()
		client := newClient()
		backend := startBackend(client)
		lrp := sampleLRP()
		name := k8s.DeploymentName(lrp)
		before := len(client.Actions())
		client.PrependReactor("patch", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, name+"-env", errors.New("denied by webhook"))
		})
		err := backend.DesireLRP(ctx, lrp)
		Expect(err).To(MatchError(opi.ErrInvalid))
		Expect(err.Error()).To(ContainSubstring("own env secret: invalid: "))
		Expect(actionsSince(client, before)).To(Equal([]string{
			"create secrets " + name + "-env",
			"create deployments " + name,
			"patch secrets " + name + "-env",
			"delete deployments " + name,
			"delete secrets " + name + "-env",
		}))
		d, s, v := countObjects(client)
		Expect([3]int{d, s, v}).To(Equal([3]int{0, 0, 0}))
	})
})
