package integration_test

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// deploy/kustomize/components/routing-nats, built with the suite's kubectl (kustomize, no
// request to the cluster) into an overlay, as an operator adds it.
var _ = Describe("The routing-nats kustomize component", func() {
	configOf := func(objects map[string][]byte) string {
		for key, doc := range objects {
			if strings.HasPrefix(key, "ConfigMap/opi-config-") {
				var cm corev1.ConfigMap
				Expect(yaml.Unmarshal(doc, &cm)).To(Succeed())
				return cm.Data["opi.yml"]
			}
		}
		Fail("no ConfigMap opi-config")
		return ""
	}

	It("lets opi's pods reach NATS (4222, 4224) at the operator's range beside the base's egress, mounts opi-nats and configures routing nats", func() {
		objects := kustomizeWith("base", "routing-nats")
		var policy networkingv1.NetworkPolicy
		Expect(yaml.Unmarshal(objects["NetworkPolicy/opi"], &policy)).To(Succeed())
		// The base's four rules (DNS, API server, CC, registries) stay; NATS is appended.
		Expect(policy.Spec.Egress).To(HaveLen(5))
		Expect(policy.Spec.Egress[2].Ports[0].Port).To(Equal(ptr.To(intstr.FromInt32(9023))))
		nats := policy.Spec.Egress[4]
		Expect(nats.To).To(HaveLen(1))
		Expect(nats.To[0].IPBlock).NotTo(BeNil())
		Expect(nats.To[0].IPBlock.CIDR).To(Equal("10.0.31.0/24"))
		var ports []int32
		for _, p := range nats.Ports {
			Expect(*p.Protocol).To(Equal(corev1.ProtocolTCP))
			ports = append(ports, p.Port.IntVal)
		}
		Expect(ports).To(ConsistOf(int32(4222), int32(4224)))

		var d appsv1.Deployment
		Expect(yaml.Unmarshal(objects["Deployment/opi"], &d)).To(Succeed())
		Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(And(
			HaveField("Name", "nats"), HaveField("VolumeSource.Secret.SecretName", "opi-nats"))))
		Expect(d.Spec.Template.Spec.Containers[0].VolumeMounts).To(ContainElement(And(
			HaveField("Name", "nats"), HaveField("MountPath", "/etc/opi/nats"), HaveField("ReadOnly", true))))

		// The component's own opi.yml (cmd/opi's specs load it).
		own, err := os.ReadFile("../deploy/kustomize/components/routing-nats/opi.yml")
		Expect(err).NotTo(HaveOccurred())
		Expect(configOf(objects)).To(Equal(string(own)))
	})

	It("replaces an overlay's own opi.yml too (as its kustomization says)", func() {
		own, err := os.ReadFile("../deploy/kustomize/components/routing-nats/opi.yml")
		Expect(err).NotTo(HaveOccurred())
		Expect(configOf(kustomizeWith("overlays/cf", "routing-nats"))).To(Equal(string(own)))
	})
})

// overlayWith writes an overlay of resource (under deploy/kustomize) with the component of
// that name and more of a kustomization's keys (YAML) in a temporary folder, as an operator
// adds a component, and returns the folder.
func overlayWith(resource, component, more string) string {
	dir := GinkgoT().TempDir()
	deploy, err := filepath.Abs("../deploy/kustomize")
	Expect(err).NotTo(HaveOccurred())
	rel, err := filepath.Rel(dir, deploy) // kustomize refuses absolute paths
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(
		"resources: ["+filepath.Join(rel, resource)+"]\ncomponents: ["+filepath.Join(rel, "components", component)+"]\n"+more), 0o600)).To(Succeed())
	return dir
}

// kustomizeWith builds overlayWith's overlay with the suite's kubectl (kustomize, no request to
// the cluster) and returns the objects by kind/name.
func kustomizeWith(resource, component string) map[string][]byte {
	objects := map[string][]byte{}
	for _, doc := range strings.Split(kubectl("kustomize", overlayWith(resource, component, "")), "\n---\n") {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		Expect(yaml.Unmarshal([]byte(doc), &meta)).To(Succeed())
		objects[meta.Kind+"/"+meta.Metadata.Name] = []byte(doc)
	}
	return objects
}
