package janitor_test

import (
	"context"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/janitor"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// A desire writes its workload first and its Secrets next (DesireLRP); opi killed in between
// leaves a workload that cannot start. The janitor deletes it once it is older than its grace,
// so that CC's sync sees the LRP missing and desires it again.
var _ = Describe("The janitor, for a workload without its Secrets", func() {
	var (
		ctx     context.Context
		client  *fake.Clientset
		backend *k8s.Backend
		logger  *lagertest.TestLogger
		lrp     *opi.LRP
		name    string
	)

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		logger = lagertest.NewTestLogger("k8s")
		lrp = backendtest.SampleLRP()
		name = names.DeploymentName(lrp)
		startCtx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		backend = backendtest.MustBackend(client, logger, k8s.Options{
			Namespace: backendtest.Namespace,
			Store:     store.Options{ReadWaitTimeout: 2 * time.Second},
			Janitor:   janitor.Options{Grace: time.Minute},
			Clients:   k8s.Clients{Metadata: backendtest.NewMetadataClient(client)},
		})
		Expect(backend.Start(startCtx)).To(Succeed())
	})

	deploymentGone := func() bool {
		_, err := client.AppsV1().Deployments(backendtest.Namespace).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}
	// age makes the LRP's Deployment as old as age, in the API and in the cache.
	age := func(by time.Duration) {
		d := backendtest.GetDeployment(client, name)
		d.CreationTimestamp = metav1.NewTime(time.Now().Add(-by))
		d, err := client.AppsV1().Deployments(backendtest.Namespace).Update(ctx, d, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(d.ResourceVersion).NotTo(BeEmpty(), "the wait below needs a version that changes")
		Eventually(func() string { return backend.CachedWorkloadVersion(lrp.LRPIdentifier) }).Should(Equal(d.ResourceVersion))
	}

	It("deletes a Deployment older than the grace whose env Secret is missing, by its uid", func() {
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		Expect(client.CoreV1().Secrets(backendtest.Namespace).Delete(ctx, name+"-env", metav1.DeleteOptions{})).To(Succeed())
		age(time.Hour)

		backend.Sweep(ctx)
		Expect(deploymentGone()).To(BeTrue())
		Expect(string(logger.Buffer().Contents())).To(ContainSubstring("deleted-incomplete-workload"))
		Expect(string(logger.Buffer().Contents())).To(ContainSubstring(name + "-env"))
	})

	It("deletes one whose image pull Secret is missing", func() {
		lrp.PrivateRegistry = &opi.PrivateRegistry{Username: "user", Password: "registry-pw"}
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		Expect(client.CoreV1().Secrets(backendtest.Namespace).Delete(ctx, name+"-registry", metav1.DeleteOptions{})).To(Succeed())
		age(time.Hour)

		backend.Sweep(ctx)
		Expect(deploymentGone()).To(BeTrue())
		Expect(string(logger.Buffer().Contents())).To(ContainSubstring(name + "-registry"))
	})

	It("keeps a complete Deployment, and one within the grace: a desire may be writing its Secrets", func() {
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		age(time.Hour)
		backend.Sweep(ctx)
		Expect(deploymentGone()).To(BeFalse(), "complete")

		Expect(client.CoreV1().Secrets(backendtest.Namespace).Delete(ctx, name+"-env", metav1.DeleteOptions{})).To(Succeed())
		age(10 * time.Second)
		backend.Sweep(ctx)
		Expect(deploymentGone()).To(BeFalse(), "within the grace")
		Expect(string(logger.Buffer().Contents())).NotTo(ContainSubstring("deleted-incomplete-workload"))
	})
})
