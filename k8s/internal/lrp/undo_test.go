package lrp_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/names"
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
		client = backendtest.NewClient()
		backend = backendtest.StartBackend(client)
		lrp = backendtest.SampleLRP()
		name = names.DeploymentName(lrp)
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

	// expectNothingLeft asserts that no workload, Secret or LRP is left, and that what a hook
	// made alongside the refused step (a Service, a budget) is controlled by the Deployment
	// the undo deleted: the garbage collector removes it.
	expectNothingLeft := func() {
		GinkgoHelper()
		d, s, _ := backendtest.CountObjects(client)
		Expect([2]int{d, s}).To(Equal([2]int{0, 0}), "deployments, secrets")
		lrps, err := backend.ListLRPs(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(lrps).To(BeEmpty())
		expectLeftToCollector(client, "deployments")
	}

	It("at the deployment removes the secret created beside it and answers why", func() {
		refuse("deployments", quota("deployments"))
		err := backend.DesireLRP(ctx, lrp)
		Expect(err).To(MatchError(opi.ErrInvalid))
		Expect(err.Error()).To(ContainSubstring("create deployment: invalid: "))
		Expect(err.Error()).To(ContainSubstring("exceeded quota"))
		Expect(err.Error()).To(HaveSuffix("; removed what this desire had written (secret " + name + "-env)"))
		backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, before), "create deployments "+name, []backendtest.Step{
			{"create secrets " + name + "-env"},
		}, nil, "delete secrets "+name+"-env")
		expectNothingLeft()
		_, _, services := backendtest.CountObjects(client)
		Expect(services).To(BeZero())
	})

	It("at the env secret removes the deployment it created", func() {
		refuse("secrets", quota("secrets"))
		err := backend.DesireLRP(ctx, lrp)
		Expect(err).To(MatchError(opi.ErrInvalid))
		Expect(err.Error()).To(ContainSubstring("create env secret: invalid: "))
		Expect(err.Error()).To(ContainSubstring("exceeded quota"))
		Expect(err.Error()).To(HaveSuffix("; removed what this desire had written (deployment " + name + ")"))
		// Round 2 does not start after a refusal in round 1.
		backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, before), "create deployments "+name, []backendtest.Step{
			{"create secrets " + name + "-env"},
		}, nil, "delete deployments "+name)
		expectNothingLeft()
	})

	It("at the registry secret removes the deployment and the env secret it created, as created", func() {
		lrp.PrivateRegistry = &opi.PrivateRegistry{Username: "user", Password: "pw"}
		client.PrependReactor("create", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if strings.HasSuffix(a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName(), "-registry") {
				return true, nil, quota("secrets")
			}
			return false, nil, nil
		})
		err := backend.DesireLRP(ctx, lrp)
		Expect(err).To(MatchError(opi.ErrInvalid))
		Expect(err.Error()).To(ContainSubstring("create registry secret: invalid: "))
		Expect(err.Error()).To(HaveSuffix("(deployment " + name + ", secret " + name + "-env)"))
		backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, before), "create deployments "+name, []backendtest.Step{
			{"create secrets " + name + "-env"},
			{"create secrets " + name + "-registry"},
		}, nil, "delete deployments "+name, "delete secrets "+name+"-env")
		del := client.Actions()[len(client.Actions())-1].(k8stesting.DeleteAction)
		pre := del.GetDeleteOptions().Preconditions
		Expect(pre).NotTo(BeNil())
		Expect(pre.UID).NotTo(BeNil(), "the secret is deleted only if it is the one this desire made")
		expectNothingLeft()
	})

	It("at the service removes the deployment and the secret it created", func() {
		refuse("services", webhook)
		err := backend.DesireLRP(ctx, lrp)
		Expect(err).To(MatchError(opi.ErrInvalid))
		Expect(err.Error()).To(ContainSubstring("create service: invalid: "))
		Expect(err.Error()).To(ContainSubstring("denied by policy"))
		Expect(err.Error()).To(HaveSuffix("(deployment " + name + ", secret " + name + "-env)"))
		backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, before), "create deployments "+name, []backendtest.Step{
			{"create secrets " + name + "-env"},
		}, []backendtest.Step{
			{"create services " + name},
			{"create poddisruptionbudgets " + name},
		}, "delete deployments "+name, "delete secrets "+name+"-env")
		expectNothingLeft()
	})

	It("keeps a secret this desire did not create, and does not delete it", func() {
		// An env Secret owned by nothing, as a desire interrupted before its workload left
		// it: the desire owns it by a patch, which a webhook refuses.
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-env", Namespace: backendtest.Namespace}}
		old, err := client.CoreV1().Secrets(backendtest.Namespace).Create(ctx, secret, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		before = len(client.Actions())
		client.PrependReactor("patch", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, name+"-env", errors.New("denied by webhook"))
		})
		err = backend.DesireLRP(ctx, lrp)
		Expect(err).To(MatchError(opi.ErrInvalid))
		Expect(err.Error()).To(ContainSubstring("create env secret: invalid: "))
		Expect(err.Error()).To(ContainSubstring("denied by webhook"))
		Expect(err.Error()).To(HaveSuffix("(deployment " + name + ")"))
		backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, before), "create deployments "+name, []backendtest.Step{
			{"create secrets " + name + "-env", "get secrets " + name + "-env", "patch secrets " + name + "-env"},
		}, nil, "delete deployments "+name)
		kept := backendtest.GetSecret(client, name+"-env")
		Expect(kept.UID).To(Equal(old.UID))
		Expect(kept.OwnerReferences).To(BeEmpty())
		d, _, _ := backendtest.CountObjects(client)
		Expect(d).To(BeZero())
		expectLeftToCollector(client, "deployments")
	})

	It("leaves an LRP that existed before as it was", func() {
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		Expect(client.CoreV1().Services(backendtest.Namespace).Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
		refuse("services", quota("services"))
		from := len(client.Actions())
		Expect(backend.DesireLRP(ctx, lrp)).To(MatchError(opi.ErrInvalid))
		for _, a := range backendtest.ActionsSince(client, from) {
			Expect(a).NotTo(HavePrefix("delete"))
		}
		backendtest.GetDeployment(client, name)
		backendtest.GetSecret(client, name+"-env")
	})

	It("is not undone when Kubernetes is only unavailable: a retry completes it", func() {
		var down atomic.Bool
		down.Store(true)
		client.PrependReactor("create", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
			if down.Load() {
				return true, nil, apierrors.NewServiceUnavailable("etcd is down")
			}
			return false, nil, nil
		})
		Expect(backend.DesireLRP(ctx, lrp)).To(MatchError(opi.ErrUnavailable))
		backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, before), "create deployments "+name, []backendtest.Step{
			{"create secrets " + name + "-env"},
		}, []backendtest.Step{
			{"create services " + name},
			{"create poddisruptionbudgets " + name},
		})
		d := backendtest.GetDeployment(client, name)
		Expect(backendtest.GetSecret(client, name+"-env").OwnerReferences).To(BeEmpty(), "a desire's Secrets are owned by nothing")

		down.Store(false)
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		Expect(backendtest.GetDeployment(client, name).UID).To(Equal(d.UID))
		Expect(metav1.IsControlledBy(backendtest.GetService(client, name), d)).To(BeTrue())
	})

	Describe("before the first write", func() {
		DescribeTable("refuses objects Kubernetes would refuse, with no API call",
			func(mutate func(*opi.LRP), message string) {
				mutate(lrp)
				err := backend.DesireLRP(ctx, lrp)
				Expect(err).To(MatchError(opi.ErrInvalid))
				Expect(err.Error()).To(ContainSubstring(message))
				Expect(backendtest.ActionsSince(client, before)).To(BeEmpty())
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
		client = backendtest.NewClient()
		backend = backendtest.StartBackend(client)
		lrp = backendtest.SampleLRP()
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
	})

	It("is refused before the patch when opi's annotations would pass 256 KiB", func() {
		before := len(client.Actions())
		huge := strings.Repeat("1", 300<<10)
		err := backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{Annotation: &huge})
		Expect(err).To(MatchError(opi.ErrInvalid))
		Expect(err.Error()).To(ContainSubstring("metadata.annotations: Too long"))
		Expect(backendtest.ActionsSince(client, before)).To(BeEmpty())
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

// expectLeftToCollector asserts that every Service and PodDisruptionBudget left is controlled
// by the workload (resource) whose delete the client saw last: the garbage collector removes
// them with it.
func expectLeftToCollector(client *fake.Clientset, resource string) {
	GinkgoHelper()
	var deleted types.UID
	for _, a := range client.Actions() {
		if del, ok := a.(k8stesting.DeleteAction); ok && a.GetResource().Resource == resource {
			pre := del.GetDeleteOptions().Preconditions
			Expect(pre).NotTo(BeNil(), "the workload is deleted only if it is the one this desire made")
			Expect(pre.UID).NotTo(BeNil())
			deleted = *pre.UID
		}
	}
	ctx := context.Background()
	services, err := client.CoreV1().Services(backendtest.Namespace).List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	budgets, err := client.PolicyV1().PodDisruptionBudgets(backendtest.Namespace).List(ctx, metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	var left []metav1.Object
	for i := range services.Items {
		left = append(left, &services.Items[i])
	}
	for i := range budgets.Items {
		left = append(left, &budgets.Items[i])
	}
	for _, obj := range left {
		Expect(deleted).NotTo(BeEmpty(), "%s left without a deleted workload to collect it", obj.GetName())
		Expect(metav1.GetControllerOf(obj)).To(HaveField("UID", deleted), "%s is controlled by the deleted workload", obj.GetName())
	}
}
