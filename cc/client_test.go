package cc_test

import (
	"context"
	"net/http"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/onsi/gomega/gbytes"

	"github.com/opi-bridge/opi/cc"
	"github.com/opi-bridge/opi/testsupport/ccstandin"
)

var _ = Describe("Client", func() {
	var (
		standin *ccstandin.Server
		client  *cc.Client
		logger  *lagertest.TestLogger
		opts    cc.Options
	)

	BeforeEach(func() {
		var err error
		standin, err = ccstandin.Start(ccstandin.Options{TLS: true, Dir: GinkgoT().TempDir()})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(standin.Close)
		logger = lagertest.NewTestLogger("cc")
		opts = cc.Options{
			InternalURL: standin.URL, CA: standin.CAFile,
			ClientCert: standin.ClientCertFile, ClientKey: standin.ClientKeyFile,
			DeliveryBound: time.Minute,
		}
	})

	JustBeforeEach(func() {
		var err error
		client, err = cc.New(opts, logger)
		Expect(err).NotTo(HaveOccurred())
		cc.SetBackoff(client, 10*time.Millisecond)
	})

	It("posts JSON over mutual TLS", func() {
		Expect(client.Post(context.Background(), standin.URL+"/internal/v4/tasks/t1/completed", map[string]any{"task_guid": "t1", "failed": false})).To(Succeed())
		cbs := standin.CallbacksTo("/internal/v4/tasks/t1/completed")
		Expect(cbs).To(HaveLen(1))
		Expect(cbs[0].Method).To(Equal(http.MethodPost))
		Expect(cbs[0].Body).To(MatchJSON(`{"task_guid":"t1","failed":false}`))
	})

	Context("without a client certificate", func() {
		BeforeEach(func() { opts.ClientCert, opts.ClientKey = "", "" })

		It("is refused by a server that requires one", func() {
			err := client.Post(context.Background(), standin.URL+"/x", map[string]any{})
			Expect(err).To(HaveOccurred())
			Expect(standin.Callbacks()).To(BeEmpty())
		})
	})

	It("retries 5xx answers until CC accepts", func() {
		standin.FailNext("/cb", 3, http.StatusServiceUnavailable)
		Expect(client.Deliver(context.Background(), "task", standin.URL+"/cb", map[string]any{"a": 1}, time.Now())).To(Succeed())
		statuses := []int{}
		for _, cb := range standin.CallbacksTo("/cb") {
			statuses = append(statuses, cb.Status)
		}
		Expect(statuses).To(Equal([]int{503, 503, 503, 200}))
	})

	It("does not retry a 4xx answer, and logs it", func() {
		standin.FailNext("/cb", 5, http.StatusNotFound)
		Expect(client.Deliver(context.Background(), "task", standin.URL+"/cb", map[string]any{}, time.Now())).To(Succeed())
		Expect(standin.CallbacksTo("/cb")).To(HaveLen(1))
		Expect(logger).To(gbytes.Say("refused"))
	})

	It("gives up once the bound has passed since the callback was owed", func() {
		standin.FailNext("/cb", 1000, http.StatusInternalServerError)
		start := time.Now()
		Expect(client.Deliver(context.Background(), "task", standin.URL+"/cb", map[string]any{}, time.Now().Add(-time.Minute+200*time.Millisecond))).To(Succeed())
		Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second))
		Expect(len(standin.CallbacksTo("/cb"))).To(BeNumerically(">", 1))
		Expect(logger).To(gbytes.Say("gave-up"))
	})

	It("returns the context's error while the callback is still owed", func() {
		standin.FailNext("/cb", 1000, http.StatusInternalServerError)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		Expect(client.Deliver(ctx, "task", standin.URL+"/cb", map[string]any{}, time.Now())).To(MatchError(context.DeadlineExceeded))
	})

	It("builds CC's crash URL below the internal URL", func() {
		Expect(client.CrashURL("g-v")).To(Equal(standin.URL + "/internal/v4/apps/g-v/crashed"))
	})

	DescribeTable("checks callback URLs",
		func(plaintext bool, url string, ok bool) {
			c, err := cc.New(cc.Options{Plaintext: plaintext}, logger)
			Expect(err).NotTo(HaveOccurred())
			if ok {
				Expect(c.CheckURL(url)).To(Succeed())
			} else {
				Expect(c.CheckURL(url)).NotTo(Succeed())
			}
		},
		Entry("https anywhere", false, "https://cc.example.com:9023/internal/v4/tasks/x/completed", true),
		Entry("http on loopback", false, "http://127.0.0.1:9023/cb", true),
		Entry("http elsewhere", false, "http://cc.example.com/cb", false),
		Entry("http elsewhere when allowed", true, "http://cc.example.com/cb", true),
		Entry("relative", false, "/internal/v4/tasks", false),
		Entry("another scheme", false, "ftp://cc.example.com/x", false),
	)

	It("refuses a client certificate without its key", func() {
		_, err := cc.New(cc.Options{ClientCert: standin.ClientCertFile}, logger)
		Expect(err).To(MatchError(ContainSubstring("go together")))
	})
})
