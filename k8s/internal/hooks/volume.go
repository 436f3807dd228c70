package hooks

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// LabelClaimSpaceGUID is the label a PersistentVolumeClaim must carry, with the space guid of
// the app as its value, for the app to mount it: a volume service's broker (or the operator)
// labels each claim it provisions for a space. Without it every app of the namespace (all of
// Cloud Foundry's spaces) could mount any claim there by naming it.
const LabelClaimSpaceGUID = "opi-bridge.io/space-guid"

// volumeHook mounts an LRP's volume_mounts: the volume id names a PersistentVolumeClaim of the
// apps' namespace (as the prior bridge did), mounted read-write at mount_dir.
//
//   - check: each volume id must be a claim name, and the claim must exist and belong to the
//     app's space (label LabelClaimSpaceGUID = the LRP's space guid) (one GET per mount, only
//     for LRPs with mounts): a mount that cannot be served is a 400 saying which and why,
//     never dropped;
//   - shape: one pod volume per mount (vol-<i>, from the claim) and its mount in the app's
//     container.
//
// It owns no objects: the claims belong to whoever provisioned the volume (a volume service
// broker) and outlive the LRP.
type volumeHook struct {
	client    kubernetes.Interface
	namespace string
}

// NewVolume is the volume hook: the claims are read in namespace.
func NewVolume(client kubernetes.Interface, namespace string) Hook {
	return &volumeHook{client: client, namespace: namespace}
}

func (h *volumeHook) Name() string { return "volume" }

func (h *volumeHook) Check(ctx context.Context, lrp *opi.LRP) error {
	for i, m := range lrp.VolumeMounts {
		if errs := validation.IsDNS1123Subdomain(m.VolumeID); len(errs) > 0 {
			return fmt.Errorf("%w: volume_mounts[%d]: volume id %q cannot name a PersistentVolumeClaim: %v", opi.ErrInvalid, i, m.VolumeID, errs)
		}
		claim, err := h.client.CoreV1().PersistentVolumeClaims(h.namespace).Get(ctx, m.VolumeID, metav1.GetOptions{})
		switch {
		case err == nil:
			if space, ok := claim.Labels[LabelClaimSpaceGUID]; !ok || space == "" || space != lrp.SpaceGUID {
				return fmt.Errorf("%w: volume_mounts[%d]: PersistentVolumeClaim %q is not labelled %s=%q (the app's space guid): an app mounts only its space's claims", opi.ErrInvalid, i, m.VolumeID, LabelClaimSpaceGUID, lrp.SpaceGUID)
			}
		case kube.Classify(err) == kube.KindNotFound:
			return fmt.Errorf("%w: volume_mounts[%d]: no PersistentVolumeClaim %q in namespace %q to mount at %s", opi.ErrInvalid, i, m.VolumeID, h.namespace, m.MountDir)
		default:
			return kube.APIError(err, "get persistent volume claim")
		}
	}
	return nil
}

func (h *volumeHook) Shape(lrp *opi.LRP, meta *metav1.ObjectMeta, template *corev1.PodTemplateSpec) {
	pod := &template.Spec
	c := names.AppContainer(pod)
	for i, m := range lrp.VolumeMounts {
		name := fmt.Sprintf("vol-%d", i)
		pod.Volumes = append(pod.Volumes, corev1.Volume{
			Name: name,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: m.VolumeID,
			}},
		})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: name, MountPath: m.MountDir})
	}
}
