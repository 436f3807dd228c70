package objects

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// Service gives the LRP's instances a stable in-cluster address, one port per LRP port.
func Service(lrp *opi.LRP, name, namespace string, owner metav1.OwnerReference) *corev1.Service {
	ports := make([]corev1.ServicePort, 0, len(lrp.Ports))
	for _, p := range lrp.Ports {
		ports = append(ports, corev1.ServicePort{
			Name:       fmt.Sprintf("port-%d", p),
			Protocol:   corev1.ProtocolTCP,
			Port:       p,
			TargetPort: intstr.FromInt32(p),
		})
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       namespace,
			Labels:          names.LRPLabels(lrp),
			OwnerReferences: []metav1.OwnerReference{owner},
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: names.SelectorLabels(lrp.LRPIdentifier),
			Ports:    ports,
		},
	}
}
