package backendtest

import (
	"context"
	"strconv"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// SampleLRP is an LRP with every field set.
func SampleLRP() *opi.LRP {
	return &opi.LRP{
		LRPIdentifier: opi.LRPIdentifier{
			GUID:    "8a3d6a87-0d35-4ad7-a6d3-2c0ef0d3bb2a",
			Version: "f4a19c5e-8b8e-4c1c-9d4b-6a3a2b1c0d9e",
		},
		ProcessType:      "web",
		AppGUID:          "6c8a4d7e-1111-2222-3333-444455556666",
		AppName:          "My App",
		SpaceGUID:        "space-guid-1",
		SpaceName:        "dev",
		OrganizationGUID: "org-guid-1",
		OrganizationName: "acme",
		Image:            "busybox:1.36",
		Command:          []string{"/bin/sh", "-c", "echo $PORT $(date); sleep 1d"},
		Env: map[string]string{
			"FOO":                    "foo-value",
			"VCAP_SERVICES":          `{"db":[{"credentials":{"password":"s3cr3t-pw"}}]}`,
			"spring.profiles.active": "cloud-value",
			"a:b":                    "colon-value",
			"x.y":                    "reserved-prefix-value",
			"CF_INSTANCE_PORT":       "user-instance-port",
		},
		Ports: []int32{8080, 9090},
		Health: opi.HealthCheck{
			Type:           opi.HealthCheckHTTP,
			Endpoint:       "/health",
			TimeoutMs:      2500,
			StartTimeoutMs: 90000,
		},
		MemoryMB:               256,
		DiskMB:                 1024,
		CPUWeight:              25,
		Instances:              2,
		Routes:                 []opi.Route{{Hostname: "app.example.com", Port: 8080}},
		LastUpdated:            "1600000000.2499998",
		UserDefinedAnnotations: map[string]string{"example.com/team": "blue"},
	}
}

// SampleTaskGUID is SampleTask's guid.
const SampleTaskGUID = "5b1e5f3a-1c2d-4e3f-8a9b-0c1d2e3f4a5b"

// SampleTask is a task with a private registry and env names Kubernetes refuses.
func SampleTask() *opi.Task {
	return &opi.Task{
		GUID: SampleTaskGUID, Name: "migrate", AppGUID: "app-guid", AppName: "dora",
		SpaceGUID: "space-guid", SpaceName: "dev", OrganizationGUID: "org-guid", OrganizationName: "acme",
		Image:   "registry.example.com/team/image:1",
		Command: []string{"/bin/sh", "-c", "echo $HOME; exit 0"},
		Env:     map[string]string{"VCAP_SERVICES": "s3cr3t", "a:b": "colon", "CF_INSTANCE_GUID": "user"},
		PrivateRegistry: &opi.PrivateRegistry{
			Server: "registry.example.com", Username: "user", Password: "registry-pw",
		},
		MemoryMB: 256, DiskMB: 512, CPUWeight: 20,
		CompletionCallback: "https://cc.internal/internal/v4/tasks/" + SampleTaskGUID + "/completed",
	}
}

// NewPod is a pod of lrp, labelled as opi labels its pods, with the given name, creation
// time and status.
func NewPod(lrp *opi.LRP, name string, created time.Time, status corev1.PodStatus) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: Namespace,
			Labels: map[string]string{
				"opi-bridge.io/guid":        lrp.GUID,
				"opi-bridge.io/version":     lrp.Version,
				"opi-bridge.io/source-type": "APP",
			},
			CreationTimestamp: metav1.NewTime(created),
		},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "opi", Image: lrp.Image}}},
		Status: status,
	}
}

// StatefulPod is a pod of lrp's StatefulSet with the given ordinal, as the StatefulSet
// controller names and labels it.
func StatefulPod(lrp *opi.LRP, ordinal int, created time.Time, status corev1.PodStatus) *corev1.Pod {
	pod := NewPod(lrp, names.DeploymentName(lrp)+"-"+strconv.Itoa(ordinal), created, status)
	pod.Labels[appsv1.PodIndexLabel] = strconv.Itoa(ordinal)
	return pod
}

// CreatePod creates pod in the fake, failing the spec if it cannot.
func CreatePod(client *fake.Clientset, pod *corev1.Pod) {
	_, err := client.CoreV1().Pods(Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
}

// Object getters that fail the test when the object is missing.

// GetDeployment is the named Deployment.
func GetDeployment(client *fake.Clientset, name string) *appsv1.Deployment {
	d, err := client.AppsV1().Deployments(Namespace).Get(context.Background(), name, metav1.GetOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return d
}

// GetStatefulSet is the named StatefulSet.
func GetStatefulSet(client *fake.Clientset, name string) *appsv1.StatefulSet {
	s, err := client.AppsV1().StatefulSets(Namespace).Get(context.Background(), name, metav1.GetOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return s
}

// GetSecret is the named Secret.
func GetSecret(client *fake.Clientset, name string) *corev1.Secret {
	s, err := client.CoreV1().Secrets(Namespace).Get(context.Background(), name, metav1.GetOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return s
}

// GetService is the named Service.
func GetService(client *fake.Clientset, name string) *corev1.Service {
	s, err := client.CoreV1().Services(Namespace).Get(context.Background(), name, metav1.GetOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return s
}

// CountObjects counts the namespace's Deployments, Secrets and Services.
func CountObjects(client *fake.Clientset) (deployments, secrets, services int) {
	ctx := context.Background()
	d, err := client.AppsV1().Deployments(Namespace).List(ctx, metav1.ListOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	s, err := client.CoreV1().Secrets(Namespace).List(ctx, metav1.ListOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	v, err := client.CoreV1().Services(Namespace).List(ctx, metav1.ListOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return len(d.Items), len(s.Items), len(v.Items)
}
