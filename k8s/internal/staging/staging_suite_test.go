package staging_test

import (
	"context"
	"flag"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/opi-bridge/opi/testsupport/fakekube"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
)

func TestStaging(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "K8s Staging Suite")
}

var _ = BeforeSuite(func() {
	// client-go's reflectors log through klog; keep that in the spec output, not on stderr.
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	Expect(flags.Set("logtostderr", "false")).To(Succeed())
	Expect(flags.Set("stderrthreshold", "FATAL")).To(Succeed())
	klog.SetOutput(GinkgoWriter)
})

const namespace = "cf-apps"

// newClient is a fake clientset that writes as an API server does (package fakekube): the
// record's delete is conditional on its UID, the attempt count's patch needs a resource version.
func newClient() *fake.Clientset {
	return fakekube.NewClientset()
}

// actionsSince describes the client's actions from index from on, as "verb resource name",
// watches and lists excluded.
func actionsSince(client *fake.Clientset, from int) []string {
	return fakekube.ActionsSince(client, from, "watch", "list")
}

func getSecret(client *fake.Clientset, name string) *corev1.Secret {
	s, err := client.CoreV1().Secrets(namespace).Get(context.Background(), name, metav1.GetOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return s
}
