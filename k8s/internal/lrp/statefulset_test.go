package lrp_test

import (
	"context"
	"errors"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/workload"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("The StatefulSet backend", func() {
	var (
		ctx     context.Context
		client  *fake.Clientset
		backend *k8s.Backend
		lrp     *opi.LRP
		name    string
		before  int
	)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	running := corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}},
	}
	crashed := corev1.PodStatus{
		Phase: corev1.PodRunning,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "opi", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, FinishedAt: metav1.NewTime(t0)},
		}}},
	}

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		backend = backendtest.StartBackendWith(client, k8s.Options{Workload: workload.StatefulSets})
		lrp = backendtest.SampleLRP()
		lrp.Env["CF_INSTANCE_INDEX"] = "user-index"
		name = names.DeploymentName(lrp)
		before = len(client.Actions())
	})

	Describe("DesireLRP", func() {
		It("makes the same objects as the Deployment backend, with a StatefulSet as their controller", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, before), "create statefulsets "+name, []backendtest.Step{
				{"create secrets " + name + "-env"},
			}, []backendtest.Step{
				{"create services " + name},
				{"create poddisruptionbudgets " + name},
			})
			s := backendtest.GetStatefulSet(client, name)
			owner := []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "StatefulSet", Name: name, UID: s.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}}
			Expect(backendtest.GetSecret(client, name+"-env").OwnerReferences).To(BeEmpty(), "made beside the StatefulSet")
			Expect(backendtest.GetService(client, name).OwnerReferences).To(Equal(owner))
			pdb, err := client.PolicyV1().PodDisruptionBudgets(backendtest.Namespace).Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(pdb.OwnerReferences).To(Equal(owner))
			deployments, err := client.AppsV1().Deployments(backendtest.Namespace).List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(deployments.Items).To(BeEmpty())
		})

		It("starts pods in parallel and rolls updates one pod at a time after a minimum ready time", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			spec := backendtest.GetStatefulSet(client, name).Spec
			Expect(*spec.Replicas).To(BeEquivalentTo(2))
			Expect(spec.PodManagementPolicy).To(Equal(appsv1.ParallelPodManagement))
			Expect(spec.UpdateStrategy).To(Equal(appsv1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(1))},
			}))
			Expect(spec.MinReadySeconds).To(BeEquivalentTo(10))
			Expect(spec.ServiceName).To(BeEmpty())
			Expect(spec.VolumeClaimTemplates).To(BeEmpty())
			Expect(spec.Selector.MatchLabels).To(Equal(map[string]string{
				"opi-bridge.io/guid": lrp.GUID, "opi-bridge.io/version": lrp.Version,
			}))
		})

		It("gives the pods the Deployment backend's template, plus CF_INSTANCE_INDEX from the ordinal", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			template := backendtest.GetStatefulSet(client, name).Spec.Template

			other := backendtest.NewClient()
			Expect(backendtest.StartBackend(other).DesireLRP(ctx, lrp)).To(Succeed())
			want := backendtest.GetDeployment(other, name).Spec.Template
			env := want.Spec.Containers[0].Env
			var kept []corev1.EnvVar
			for _, e := range env {
				if e.Name != "CF_INSTANCE_INDEX" { // the app's own: the platform's replaces it
					kept = append(kept, e)
				}
			}
			Expect(kept).To(HaveLen(len(env) - 1))
			want.Spec.Containers[0].Env = kept
			var index []corev1.EnvVar
			template.Spec.Containers[0].Env, index = splitEnv(template.Spec.Containers[0].Env, "CF_INSTANCE_INDEX")
			Expect(index).To(Equal([]corev1.EnvVar{{Name: "CF_INSTANCE_INDEX", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.labels['apps.kubernetes.io/pod-index']"},
			}}}))
			Expect(template).To(Equal(want))

			Expect(backendtest.GetSecret(client, name+"-env").Data).NotTo(HaveKey("CF_INSTANCE_INDEX"))
			Expect(backendtest.GetSecret(other, name+"-env").Data).To(HaveKeyWithValue("CF_INSTANCE_INDEX", []byte("user-index")))
		})

		It("reads the LRP back as the Deployment backend does", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			got, err := backend.GetLRP(ctx, lrp.LRPIdentifier)
			Expect(err).NotTo(HaveOccurred())

			other := backendtest.NewClient()
			deployments := backendtest.StartBackend(other)
			Expect(deployments.DesireLRP(ctx, lrp)).To(Succeed())
			want, err := deployments.GetLRP(ctx, lrp.LRPIdentifier)
			Expect(err).NotTo(HaveOccurred())
			got.ModificationTag, want.ModificationTag = opi.ModificationTag{}, opi.ModificationTag{}
			Expect(got).To(Equal(want))

			list, err := backend.ListLRPs(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(list).To(HaveLen(1))
			Expect(list[0].ProcessGUID()).To(Equal(lrp.ProcessGUID()))
		})

		It("removes the StatefulSet and the secret it created when Kubernetes refuses the service", func() {
			client.PrependReactor("create", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, name, errors.New("exceeded quota"))
			})
			err := backend.DesireLRP(ctx, lrp)
			Expect(err).To(MatchError(opi.ErrInvalid))
			Expect(err.Error()).To(HaveSuffix("(statefulset " + name + ", secret " + name + "-env)"))
			backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, before), "create statefulsets "+name, []backendtest.Step{
				{"create secrets " + name + "-env"},
			}, []backendtest.Step{
				{"create services " + name},
				{"create poddisruptionbudgets " + name},
			}, "delete statefulsets "+name, "delete secrets "+name+"-env")
			sets, err := client.AppsV1().StatefulSets(backendtest.Namespace).List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(sets.Items).To(BeEmpty())
			// The budget made at once with the refused service is the garbage collector's.
			expectLeftToCollector(client, "statefulsets")
		})

		It("refuses before writing a StatefulSet Kubernetes would refuse, naming it", func() {
			lrp.AppName = strings.Repeat("n", 300<<10)
			err := backend.DesireLRP(ctx, lrp)
			Expect(err).To(MatchError(opi.ErrInvalid))
			Expect(err.Error()).To(ContainSubstring("the statefulset " + names.DeploymentName(lrp) + " would break a rule of Kubernetes"))
			Expect(backendtest.ActionsSince(client, before)).To(BeEmpty())
		})

		It("changes nothing when the StatefulSet exists (its owned objects are only read)", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			from := len(client.Actions())
			changed := backendtest.SampleLRP()
			changed.Instances = 7
			Expect(backend.DesireLRP(ctx, changed)).To(Succeed())
			backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, from), "create statefulsets "+name, []backendtest.Step{
				{"create secrets " + name + "-env", "get secrets " + name + "-env"},
			}, []backendtest.Step{
				{"create services " + name, "get services " + name},
				{"create poddisruptionbudgets " + name, "get poddisruptionbudgets " + name},
			})
			Expect(*backendtest.GetStatefulSet(client, name).Spec.Replicas).To(BeEquivalentTo(2))
			Expect(backendtest.GetSecret(client, name+"-env").OwnerReferences).To(BeEmpty())
		})
	})

	Describe("instances", func() {
		BeforeEach(func() {
			lrp.Instances = 3
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		})

		createPods := func(pods ...*corev1.Pod) {
			for _, p := range pods {
				backendtest.CreatePod(client, p)
			}
			EventuallyWithOffset(1, func() int { return backend.CachedPodCount(lrp.LRPIdentifier) }).Should(Equal(len(pods)))
		}

		It("reports each pod at its ordinal, whatever the creation order, and nothing where no pod is", func() {
			terminating := backendtest.StatefulPod(lrp, 1, t0, running)
			terminating.DeletionTimestamp = &metav1.Time{Time: t0.Add(time.Minute)}
			terminating.Finalizers = []string{"example.com/hold"}
			createPods(
				backendtest.StatefulPod(lrp, 2, t0, crashed),
				backendtest.StatefulPod(lrp, 0, t0.Add(time.Hour), running),
				terminating,
				backendtest.StatefulPod(lrp, 3, t0, running), // a scale-down in progress
			)
			got, err := backend.GetInstances(ctx, lrp.LRPIdentifier)
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(HaveLen(2))
			Expect(got[0].Index).To(BeEquivalentTo(0))
			Expect(got[0].State).To(Equal(opi.InstanceRunning))
			Expect(got[1].Index).To(BeEquivalentTo(2))
			Expect(got[1].State).To(Equal(opi.InstanceCrashed))
		})

		It("stops the pod with the ordinal asked for", func() {
			createPods(backendtest.StatefulPod(lrp, 0, t0.Add(time.Hour), running), backendtest.StatefulPod(lrp, 2, t0, running))
			from := len(client.Actions())
			Expect(backend.StopInstance(ctx, lrp.LRPIdentifier, 2)).To(Succeed())
			Expect(backendtest.ActionsSince(client, from)).To(Equal([]string{"delete pods " + name + "-2"}))
			got, err := backend.GetInstances(ctx, lrp.LRPIdentifier)
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(HaveLen(1))
			Expect(got[0].Index).To(BeEquivalentTo(0))
		})

		It("succeeds without a call for a valid ordinal without a pod, and refuses one out of range", func() {
			createPods(backendtest.StatefulPod(lrp, 0, t0, running))
			from := len(client.Actions())
			Expect(backend.StopInstance(ctx, lrp.LRPIdentifier, 1)).To(Succeed())
			err := backend.StopInstance(ctx, lrp.LRPIdentifier, 3)
			Expect(errors.Is(err, opi.ErrInvalid)).To(BeTrue(), "%v", err)
			Expect(err).To(MatchError(ContainSubstring("out of range 0..2")))
			Expect(backendtest.ActionsSince(client, from)).To(BeEmpty())
		})
	})

	Describe("UpdateLRP and StopLRP", func() {
		BeforeEach(func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			before = len(client.Actions())
		})

		It("patches the StatefulSet's replicas and image and keeps the budget in step", func() {
			Expect(backend.UpdateLRP(ctx, lrp.LRPIdentifier, opi.LRPUpdate{
				Instances: ptr.To(int32(1)),
				Image:     ptr.To("busybox:1.37"),
			})).To(Succeed())
			Expect(backendtest.ActionsSince(client, before)).To(Equal([]string{
				"delete poddisruptionbudgets " + name, // the budget hook, before the patch
				"patch statefulsets " + name,
			}))
			s := backendtest.GetStatefulSet(client, name)
			Expect(*s.Spec.Replicas).To(BeEquivalentTo(1))
			Expect(s.Spec.Template.Spec.Containers[0].Image).To(Equal("busybox:1.37"))
			got, err := backend.GetLRP(ctx, lrp.LRPIdentifier)
			Expect(err).NotTo(HaveOccurred())
			Expect(got.Instances).To(BeEquivalentTo(1))
			Expect(got.Image).To(Equal("busybox:1.37"))
		})

		It("deletes the env secret by name, then the StatefulSet with background propagation", func() {
			Expect(backend.StopLRP(ctx, lrp.LRPIdentifier)).To(Succeed())
			Expect(backendtest.ActionsSince(client, before)).To(Equal([]string{"delete secrets " + name + "-env", "delete statefulsets " + name}))
			_, err := backend.GetLRP(ctx, lrp.LRPIdentifier)
			Expect(errors.Is(err, opi.ErrNotFound)).To(BeTrue())
		})
	})
})

// splitEnv takes the variable named name out of env.
func splitEnv(env []corev1.EnvVar, name string) (rest, taken []corev1.EnvVar) {
	for _, e := range env {
		if e.Name == name {
			taken = append(taken, e)
		} else {
			rest = append(rest, e)
		}
	}
	return rest, taken
}
