package objects

import (
	"github.com/opi-bridge/opi/k8s/names"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/opi"
)

// StatefulSet is the LRP's workload as a StatefulSet: the Deployment's metadata and pod
// template (with CF_INSTANCE_INDEX from the ordinal, see PlatformEnv) and
//   - parallel pod management: CF starts and stops all instances at once, and a crashed
//     instance must not hold back the start of the others (the default OrderedReady would);
//   - rolling updates of the template, one pod at a time from the highest ordinal, each
//     waiting until its replacement has been Ready for minReadySeconds. A StatefulSet cannot
//     surge (a second pod of the same ordinal would share its name): each replaced instance is
//     down while its successor starts, and a 1-instance app is down during an image update.
//     maxUnavailable is 1 (also the default): the MaxUnavailableStatefulSet feature gate is on
//     in the local control plane (a StatefulSet with 2 had two pods replaced at once), and
//     where it is off the API server drops the field and the controller replaces one at a time;
//   - no serviceName: the LRP's Service is an ordinary ClusterIP Service (per-pod DNS names,
//     which a headless governing Service would give, are nothing CF apps use);
//   - no volume claim templates: CF apps are stateless; the StatefulSet is for its ordinals.
func StatefulSet(lrp *opi.LRP, name, namespace string, w Workload) *appsv1.StatefulSet {
	replicas := lrp.Instances
	return &appsv1.StatefulSet{
		ObjectMeta: WorkloadMeta(lrp, name, namespace),
		Spec: appsv1.StatefulSetSpec{
			Replicas:             &replicas,
			Selector:             &metav1.LabelSelector{MatchLabels: names.SelectorLabels(lrp.LRPIdentifier)},
			Template:             PodTemplate(lrp, name, w),
			PodManagementPolicy:  appsv1.ParallelPodManagement,
			RevisionHistoryLimit: ptr.To(int32(RevisionHistoryLimit)),
			MinReadySeconds:      w.MinReadySeconds,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
				Type:          appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(1))},
			},
		},
	}
}
