package cc_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/onsi/gomega/gbytes"

	"github.com/opi-bridge/opi/cc"
	"github.com/opi-bridge/opi/testsupport/ccstandin"
	"github.com/opi-bridge/opi/testsupport/pki"
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

	DescribeTable("allows callback URLs only to the endpoints of cc.internal_url and cc.callback_urls",
		func(url string, ok bool) {
			c, err := cc.New(cc.Options{
				InternalURL:  "https://cc.example.com:9023",
				CallbackURLs: []string{"https://cc2.example.com/ignored/path", "http://127.0.0.1:9024"},
			}, logger)
			Expect(err).NotTo(HaveOccurred())
			if ok {
				Expect(c.CheckURL(url)).To(Succeed())
			} else {
				Expect(c.CheckURL(url)).NotTo(Succeed())
			}
		},
		Entry("the internal url's endpoint", "https://cc.example.com:9023/internal/v4/tasks/x/completed", true),
		Entry("its host in capitals", "https://CC.example.com:9023/cb", true),
		Entry("its host on another port", "https://cc.example.com:9024/cb", false),
		Entry("its host and port over plain http", "http://cc.example.com:9023/cb", false),
		Entry("another https host", "https://evil.example.com:9023/cb", false),
		Entry("an allow-list entry, any path", "https://cc2.example.com/internal/v3/staging/x/build_completed", true),
		Entry("an allow-list entry with its default port", "https://cc2.example.com:443/cb", true),
		Entry("an allow-list entry on another port", "https://cc2.example.com:8443/cb", false),
		Entry("a loopback http entry", "http://127.0.0.1:9024/cb", true),
		Entry("loopback http on another port", "http://127.0.0.1:9025/cb", false),
		Entry("http elsewhere", "http://cc.example.com/cb", false),
		Entry("relative", "/internal/v4/tasks", false),
		Entry("another scheme", "ftp://cc.example.com:9023/x", false),
	)

	It("allows plain http to a host that is not loopback only with cc.plaintext, and only to its endpoints", func() {
		_, err := cc.New(cc.Options{CallbackURLs: []string{"http://cc.cf.svc:9022"}}, logger)
		Expect(err).To(MatchError(ContainSubstring("cc.plaintext")))
		c, err := cc.New(cc.Options{Plaintext: true, CallbackURLs: []string{"http://cc.cf.svc:9022"}}, logger)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.CheckURL("http://cc.cf.svc:9022/cb")).To(Succeed())
		Expect(c.CheckURL("http://other.cf.svc:9022/cb")).To(MatchError(cc.ErrNotAllowed))
	})

	It("refuses every callback URL when no endpoint is configured, saying what to configure", func() {
		c, err := cc.New(cc.Options{}, logger)
		Expect(err).NotTo(HaveOccurred())
		err = c.CheckURL("https://cc.example.com:9023/cb")
		Expect(err).To(MatchError(cc.ErrNoEndpoints))
		Expect(err.Error()).To(ContainSubstring("cc.internal_url or cc.callback_urls"))
		Expect(c.Deliver(context.Background(), "task", "https://cc.example.com:9023/cb", map[string]any{}, time.Now())).To(Succeed())
		Expect(logger).To(gbytes.Say("unusable"))
	})

	It("refuses an allow-list entry with a query or user", func() {
		_, err := cc.New(cc.Options{CallbackURLs: []string{"https://cc.example.com/?token=x"}}, logger)
		Expect(err).To(MatchError(ContainSubstring("no user, query or fragment")))
		_, err = cc.New(cc.Options{CallbackURLs: []string{"https://u:p@cc.example.com/"}}, logger)
		Expect(err).To(MatchError(ContainSubstring("no user, query or fragment")))
	})

	Describe("the dialers", func() {
		It("connect only to allowed endpoints, whatever URL led there", func() {
			other := httptest.NewServer(http.NotFoundHandler())
			DeferCleanup(other.Close)
			addr := strings.TrimPrefix(other.URL, "http://")

			_, err := cc.Dial(client, context.Background(), addr)
			Expect(err).To(MatchError(cc.ErrNotAllowed))
			_, err = cc.DialTLS(client, context.Background(), addr)
			Expect(err).To(MatchError(cc.ErrNotAllowed))

			// The same address allowed over plain http is dialled (the check is what refused it).
			allowing, err := cc.New(cc.Options{CallbackURLs: []string{other.URL}}, logger)
			Expect(err).NotTo(HaveOccurred())
			conn, err := cc.Dial(allowing, context.Background(), addr)
			Expect(err).NotTo(HaveOccurred())
			conn.Close()
			_, err = cc.DialTLS(allowing, context.Background(), addr)
			Expect(err).To(MatchError(cc.ErrNotAllowed), "http's endpoint is not https's")
		})
	})

	Describe("opi's client certificate", func() {
		var (
			ca      *pki.CA
			dir     string
			clients chan int // how many certificates each connection to the server presented
			server  *httptest.Server
		)

		BeforeEach(func() {
			var err error
			dir = GinkgoT().TempDir()
			ca, err = pki.NewCA("shared-ca")
			Expect(err).NotTo(HaveOccurred())
			serverPair, err := ca.Server("other")
			Expect(err).NotTo(HaveOccurred())
			cert, err := tls.X509KeyPair(serverPair.CertPEM, serverPair.KeyPEM)
			Expect(err).NotTo(HaveOccurred())
			clients = make(chan int, 10)
			server = httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
			server.TLS = &tls.Config{
				Certificates: []tls.Certificate{cert},
				// A server of the same CA that asks for a client certificate and takes any.
				ClientAuth: tls.RequestClientCert,
				VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
					clients <- len(raw)
					return nil
				},
			}
			server.StartTLS()
			DeferCleanup(server.Close)
			clientPair, err := ca.Client("opi")
			Expect(err).NotTo(HaveOccurred())
			opts.ClientCert, opts.ClientKey, err = clientPair.Write(dir, "client")
			Expect(err).NotTo(HaveOccurred())
			opts.CA, err = ca.WriteCert(dir, "ca")
			Expect(err).NotTo(HaveOccurred())
		})

		It("is never presented to a server that is not an allowed endpoint", func() {
			Expect(client.Post(context.Background(), server.URL+"/cb", map[string]any{})).To(MatchError(cc.ErrNotAllowed))
			_, err := cc.DialTLS(client, context.Background(), strings.TrimPrefix(server.URL, "https://"))
			Expect(err).To(MatchError(cc.ErrNotAllowed))
			Expect(clients).To(BeEmpty(), "no TLS handshake reached the server")
		})

		Context("when the server is an allowed endpoint", func() {
			BeforeEach(func() { opts.CallbackURLs = []string{server.URL} })

			It("is presented", func() {
				Expect(client.Post(context.Background(), server.URL+"/cb", map[string]any{})).To(Succeed())
				Expect(clients).To(Receive(Equal(1)))
			})
		})
	})

	Describe("redirects", func() {
		var target *ccstandin.Server

		BeforeEach(func() {
			var err error
			target, err = ccstandin.Start(ccstandin.Options{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(target.Close)
		})

		It("are not followed: a 3xx is a refusal, logged and not retried", func() {
			hits := 0
			redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits++
				http.Redirect(w, r, target.URL+"/cb", http.StatusTemporaryRedirect)
			}))
			DeferCleanup(redirecting.Close)
			// Both endpoints are allowed: what stops the redirect is that none is followed.
			c, err := cc.New(cc.Options{CallbackURLs: []string{redirecting.URL, target.URL}, DeliveryBound: time.Minute}, logger)
			Expect(err).NotTo(HaveOccurred())
			cc.SetBackoff(c, 10*time.Millisecond)

			var status *cc.StatusError
			Expect(errors.As(c.Post(context.Background(), redirecting.URL+"/cb", map[string]any{}), &status)).To(BeTrue())
			Expect(status.Code).To(Equal(http.StatusTemporaryRedirect))

			Expect(c.Deliver(context.Background(), "task", redirecting.URL+"/cb", map[string]any{}, time.Now())).To(Succeed())
			Expect(hits).To(Equal(2), "one Post, one attempt of Deliver")
			Expect(target.Callbacks()).To(BeEmpty())
			Expect(logger).To(gbytes.Say("refused"))
		})
	})

	Describe("an endpoint that never answers", func() {
		var slow, healthy *ccstandin.Server

		BeforeEach(func() {
			var err error
			slow, err = ccstandin.Start(ccstandin.Options{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(slow.Close)
			slow.Stall()
			healthy, err = ccstandin.Start(ccstandin.Options{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(healthy.Close)
			opts.CallbackURLs = []string{slow.URL, healthy.URL}
		})

		It("holds no more than its share of deliveries, and the others are delivered meanwhile", func() {
			stuck, cancel := context.WithCancel(context.Background())
			results := make(chan error, cc.DefaultMaxPerEndpoint)
			for i := range cc.DefaultMaxPerEndpoint {
				go func() {
					results <- client.Deliver(stuck, "task", fmt.Sprintf("%s/slow/%d", slow.URL, i), map[string]any{}, time.Now())
				}()
			}
			Eventually(slow.Held).Should(Equal(cc.DefaultMaxPerEndpoint))

			// One more to the slow endpoint is still owed at once; the healthy one is delivered.
			ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
			defer stop()
			Expect(client.Deliver(ctx, "task", slow.URL+"/slow/more", map[string]any{}, time.Now())).To(MatchError(cc.ErrEndpointBusy))
			Expect(client.Deliver(ctx, "task", healthy.URL+"/cb", map[string]any{}, time.Now())).To(Succeed())
			Expect(healthy.Accepted("/cb")).To(HaveLen(1))
			Expect(slow.Held()).To(Equal(cc.DefaultMaxPerEndpoint))

			// The stuck deliveries are still owed when their context ends, and free their share.
			cancel()
			for range cc.DefaultMaxPerEndpoint {
				Eventually(results).Should(Receive(MatchError(context.Canceled)))
			}
			Expect(client.Deliver(stuck, "task", slow.URL+"/slow/again", map[string]any{}, time.Now())).To(MatchError(context.Canceled))
		})

		It("settles a callback whose bound has passed while the endpoint was busy", func() {
			stuck, cancel := context.WithCancel(context.Background())
			defer cancel()
			for i := range cc.DefaultMaxPerEndpoint {
				go func() {
					_ = client.Deliver(stuck, "task", fmt.Sprintf("%s/slow/%d", slow.URL, i), map[string]any{}, time.Now())
				}()
			}
			Eventually(slow.Callbacks).Should(HaveLen(cc.DefaultMaxPerEndpoint))
			Expect(client.Deliver(context.Background(), "task", slow.URL+"/late", map[string]any{}, time.Now().Add(-2*time.Minute))).To(Succeed())
			Expect(logger).To(gbytes.Say("gave-up"))
		})
	})

	Describe("logs", func() {
		const secret = "s3cr3t-7f3a9c1e5b"

		It("show callback URLs without query or user information", func() {
			closed := httptest.NewServer(http.NotFoundHandler())
			closed.Close() // nothing listens there any more: every attempt is a network error
			c, err := cc.New(cc.Options{CallbackURLs: []string{closed.URL}, DeliveryBound: time.Minute}, logger)
			Expect(err).NotTo(HaveOccurred())
			cc.SetBackoff(c, 10*time.Millisecond)
			target := strings.Replace(closed.URL, "http://", "http://opi:pw-"+secret+"@", 1) + "/internal/v4/tasks/t1/completed?token=" + secret

			Expect(c.Deliver(context.Background(), "task", target, map[string]any{}, time.Now().Add(-time.Minute+300*time.Millisecond))).To(Succeed())
			Expect(c.Deliver(context.Background(), "task", "https://elsewhere.example.com/cb?token="+secret, map[string]any{}, time.Now())).To(Succeed())
			Expect(c.CheckURL("https://elsewhere.example.com/cb?token=" + secret)).To(MatchError(Not(ContainSubstring(secret))))

			logged := string(logger.Buffer().Contents())
			Expect(logged).To(ContainSubstring("retrying"))
			Expect(logged).To(ContainSubstring("gave-up"))
			Expect(logged).To(ContainSubstring("unusable"))
			Expect(logged).To(ContainSubstring(closed.URL + "/internal/v4/tasks/t1/completed"))
			Expect(logged).NotTo(ContainSubstring(secret))
		})

		It("Redact keeps scheme, host and path", func() {
			Expect(cc.Redact("https://u:p@cc.example.com:9023/a/b?token=x#f")).To(Equal("https://cc.example.com:9023/a/b"))
		})
	})

	It("refuses a client certificate without its key", func() {
		_, err := cc.New(cc.Options{ClientCert: standin.ClientCertFile}, logger)
		Expect(err).To(MatchError(ContainSubstring("go together")))
	})
})
