package gorouter_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	"github.com/nats-io/nats.go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"

	"github.com/opi-bridge/opi/gorouter"
	"github.com/opi-bridge/opi/metrics"
	"github.com/opi-bridge/opi/testsupport/natsserver"
	"github.com/opi-bridge/opi/testsupport/pki"
)

// Intervals announced in seconds take a few of them to show; a spec waits this long at most.
const announcedWait = 15 * time.Second

var greet = message{Subject: gorouter.SubjectGreet}

var _ = Describe("Emitter", func() {
	var (
		srv    *natsserver.Server
		w      *watcher
		m      *metrics.Metrics
		logger *lagertest.TestLogger
		cfg    gorouter.Config
		e      *gorouter.Emitter
	)

	newEmitter := func() *gorouter.Emitter {
		GinkgoHelper()
		emitter, err := gorouter.NewEmitter(cfg, logger, m)
		Expect(err).NotTo(HaveOccurred())
		return emitter
	}

	BeforeEach(func() {
		m = metrics.New()
		logger = lagertest.NewTestLogger("gorouter")
	})

	Context("with a plain server", func() {
		BeforeEach(func() {
			var err error
			srv, err = natsserver.Start(natsserver.Options{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(srv.Shutdown)
			w = watch(srv.URL())
			// No re-send on the default's account within a spec: only announced intervals count.
			cfg = gorouter.Config{URLs: []string{srv.URL()}, DefaultRegisterInterval: time.Hour}
			e = newEmitter()
		})

		It("registers on Set and unregisters on Delete, at once", func() {
			run(e)
			Eventually(w.greets).Should(Equal(1))
			a := registration("10.0.0.1", 8080, "a.example.com", "a.example.com/api")
			e.Set("a", a, time.Time{})
			Eventually(w.all).Should(Equal([]message{greet, register(a)}))
			e.Delete("a")
			Eventually(w.all).Should(Equal([]message{greet, register(a), unregister(a)}))
			Expect(e.Len()).To(Equal(0))
		})

		It("sends nothing for a Set that changes nothing, and nothing for a Delete of what is not there", func() {
			run(e)
			Eventually(w.greets).Should(Equal(1))
			a := registration("10.0.0.1", 8080, "a.example.com")
			e.Set("a", a, time.Time{})
			e.Set("a", registration("10.0.0.1", 8080, "a.example.com"), time.Now())
			e.Delete("b")
			e.Delete("a")
			Eventually(w.all).Should(Equal([]message{greet, register(a), unregister(a)}))
		})

		It("unregisters the URIs a change drops before registering what is left", func() {
			run(e)
			Eventually(w.greets).Should(Equal(1))
			both := registration("10.0.0.1", 8080, "a.example.com", "b.example.com")
			e.Set("a", both, time.Time{})
			left := registration("10.0.0.1", 8080, "a.example.com")
			e.Set("a", left, time.Time{})
			dropped := registration("10.0.0.1", 8080, "b.example.com")
			Eventually(w.all).Should(Equal([]message{greet, register(both), unregister(dropped), register(left)}))
		})

		It("unregisters the old endpoint whole when the host or the port changes", func() {
			run(e)
			Eventually(w.greets).Should(Equal(1))
			old := registration("10.0.0.1", 8080, "a.example.com")
			e.Set("a", old, time.Time{})
			moved := registration("10.0.0.2", 8080, "a.example.com", "b.example.com")
			e.Set("a", moved, time.Time{})
			port := registration("10.0.0.2", 9090, "a.example.com", "b.example.com")
			e.Set("a", port, time.Time{})
			Eventually(w.all).Should(Equal([]message{greet, register(old), unregister(old), register(moved),
				unregister(moved), register(port)}))
		})

		It("registers a change that keeps the endpoint and its URIs without unregistering", func() {
			run(e)
			Eventually(w.greets).Should(Equal(1))
			a := registration("10.0.0.1", 8080, "a.example.com")
			e.Set("a", a, time.Time{})
			more := registration("10.0.0.1", 8080, "a.example.com", "b.example.com")
			more.PrivateInstanceIndex = "3"
			e.Set("a", more, time.Time{})
			Eventually(w.all).Should(Equal([]message{greet, register(a), register(more)}))
		})

		It("keeps its own copy of a registration: a caller changing its map afterwards is a change", func() {
			run(e)
			Eventually(w.greets).Should(Equal(1))
			r := registration("10.0.0.1", 8080, "a.example.com")
			e.Set("a", r, time.Time{})
			first := register(r)
			r.Tags["app_name"] = "renamed"
			r.URIs[0] = "b.example.com"
			e.Set("a", r, time.Time{})
			Eventually(w.all).Should(Equal([]message{greet, first, unregister(registration("10.0.0.1", 8080, "a.example.com")), register(r)}))
		})

		It("replaces the whole table: unregisters what is gone, registers what is new or changed", func() {
			a, b, c := registration("10.0.0.1", 8080, "a.example.com"), registration("10.0.0.2", 8080, "b.example.com"),
				registration("10.0.0.3", 8080, "c.example.com")
			e.Set("a", a, time.Time{})
			e.Set("b", b, time.Time{})
			run(e)
			Eventually(w.all).Should(ConsistOf(greet, register(a), register(b)))
			mark := len(w.all())
			changed := registration("10.0.0.2", 8080, "b.example.com", "b2.example.com")
			e.Replace(map[string]gorouter.Registration{"b": changed, "c": c})
			Eventually(func() []message { return w.after(mark) }).Should(ConsistOf(unregister(a), register(changed), register(c)))
			Expect(w.after(mark)[0]).To(Equal(unregister(a)))
			Expect(e.Len()).To(Equal(2))
		})

		It("sends nothing while not running, and everything at once when Run starts", func() {
			a, b, c := registration("10.0.0.1", 8080, "a.example.com"), registration("10.0.0.2", 8080, "b.example.com"),
				registration("10.0.0.3", 8080, "c.example.com")
			e.Set("a", a, time.Time{})
			e.Set("b", b, time.Time{})
			e.Set("c", c, time.Time{})
			e.Delete("c")
			first := run(e)
			Eventually(w.all).Should(ConsistOf(greet, register(a), register(b)))
			Expect(w.all()[0]).To(Equal(greet))
			first.stop()

			// Between runs (another replica leads): the table changes, nothing is sent.
			mark := len(w.all())
			d := registration("10.0.0.4", 8080, "d.example.com")
			e.Set("d", d, time.Time{})
			e.Delete("a")
			bLess := registration("10.0.0.2", 8080)
			e.Set("b", bLess, time.Time{})
			e.Replace(map[string]gorouter.Registration{"b": bLess, "d": d})

			// Leader again: everything at once, and none of what happened in between.
			run(e)
			Eventually(func() []message { return w.after(mark) }).Should(ConsistOf(greet, register(bLess), register(d)))
			Expect(w.after(mark)[0]).To(Equal(greet))
		})

		It("sends an Unregister made before Run first in the first full send, before the table, and one made while connected at once", func() {
			a, gone := registration("10.0.0.1", 8080, "a.example.com"), registration("10.0.0.9", 8080, "gone.example.com")
			e.Set("a", a, time.Time{})
			e.Unregister(gone)
			Expect(e.Flushed()).To(BeFalse(), "not running")
			run(e)
			Eventually(w.all).Should(Equal([]message{greet, unregister(gone), register(a)}))
			Eventually(e.Flushed).Should(BeTrue())
			Expect(e.Len()).To(Equal(1), "an Unregister leaves the table alone")

			mark := len(w.all())
			e.Unregister(gone)
			Eventually(func() []message { return w.after(mark) }).Should(Equal([]message{unregister(gone)}))
		})

		It("re-sends everything when a gorouter (re)starts", func() {
			a, b := registration("10.0.0.1", 8080, "a.example.com"), registration("10.0.0.2", 8080, "b.example.com")
			e.Set("a", a, time.Time{})
			e.Set("b", b, time.Time{})
			run(e)
			Eventually(w.all).Should(ConsistOf(greet, register(a), register(b)))
			w.publish(gorouter.SubjectStart, announce("gorouter-1", 3600))
			Eventually(w.registers(a)).Should(Equal(2))
			Eventually(w.registers(b)).Should(Equal(2))
		})

		It("answers a burst of router.start with one re-send, not one per message", func() {
			a, b := registration("10.0.0.1", 8080, "a.example.com"), registration("10.0.0.2", 8080, "b.example.com")
			e.Set("a", a, time.Time{})
			run(e)
			Eventually(w.registers(a)).Should(Equal(1))
			for i := range 20 {
				w.publish(gorouter.SubjectStart, announce(fmt.Sprintf("gorouter-%d", i), 3600))
			}
			// The last start was handled once it is logged; b's register, sent after it on the
			// same connection, arrives after every re-send handled before it.
			Eventually(logger).Should(gbytes.Say(`"id":"gorouter-19"`))
			e.Set("b", b, time.Time{})
			Eventually(w.registers(b)).Should(Equal(1))
			// One re-send at once, and at most one more when the window (5 s at the default's
			// hour) ends, should the burst take that long.
			Expect(w.registers(a)()).To(And(BeNumerically(">=", 2), BeNumerically("<=", 3)))
		})

		It("still re-sends for a router.start that arrives while re-sends are held back, when the window ends", func() {
			a := registration("10.0.0.1", 8080, "a.example.com")
			e.Set("a", a, time.Time{})
			run(e)
			Eventually(w.registers(a)).Should(Equal(1))
			w.publish(gorouter.SubjectStart, announce("gorouter-1", 3600))
			Eventually(w.registers(a)).Should(Equal(2))
			w.publish(gorouter.SubjectStart, announce("gorouter-2", 3600))
			// Not before the next interval (an hour): at the end of the window.
			Eventually(w.registers(a), announcedWait).Should(Equal(3))
		})

		It("re-sends at the interval a gorouter answers its greet with", func() {
			w.answerGreets("gorouter-1", 1)
			a := registration("10.0.0.1", 8080, "a.example.com")
			e.Set("a", a, time.Time{})
			run(e)
			Eventually(w.registers(a), announcedWait).Should(BeNumerically(">=", 3))
		})

		It("re-sends at the interval a router.start announces", func() {
			a := registration("10.0.0.1", 8080, "a.example.com")
			e.Set("a", a, time.Time{})
			run(e)
			Eventually(w.registers(a)).Should(Equal(1))
			w.publish(gorouter.SubjectStart, announce("gorouter-1", 1))
			// One for the start, then at least two at the interval.
			Eventually(w.registers(a), announcedWait).Should(BeNumerically(">=", 4))
		})

		It("keeps the smallest interval several gorouters announce", func() {
			w.answerGreets("gorouter-slow", 3600)
			fast := watch(srv.URL())
			fast.answerGreets("gorouter-fast", 1)
			a := registration("10.0.0.1", 8080, "a.example.com")
			e.Set("a", a, time.Time{})
			run(e)
			Eventually(w.registers(a), announcedWait).Should(BeNumerically(">=", 2))
			// The slow one restarts and announces itself again: the fast one's interval stays.
			w.publish(gorouter.SubjectStart, announce("gorouter-slow", 3600))
			n := w.registers(a)()
			Eventually(w.registers(a), announcedWait).Should(BeNumerically(">=", n+3))
		})

		It("keeps concurrent Sets, Deletes and Replaces consistent", func() {
			run(e)
			Eventually(w.greets).Should(Equal(1))
			final := map[string]gorouter.Registration{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := range 50 {
						key := fmt.Sprintf("k%d-%d", g, i%5)
						r := registration(fmt.Sprintf("10.0.%d.%d", g, i%5), uint16(8000+i), "a.example.com")
						e.Set(key, r, time.Now())
						if i%7 == 0 {
							e.Delete(key)
						}
						if i == 25 && g == 0 {
							e.Replace(map[string]gorouter.Registration{"k0-0": r})
						}
					}
				})
			}
			wg.Wait()
			for g := range 8 {
				for j := range 5 {
					key := fmt.Sprintf("k%d-%d", g, j)
					r := registration(fmt.Sprintf("10.0.%d.%d", g, j), uint16(8045+j), "a.example.com")
					e.Set(key, r, time.Time{})
					mu.Lock()
					final[key] = r
					mu.Unlock()
				}
			}
			Expect(e.Len()).To(Equal(len(final)))
			var want []any
			for _, r := range final {
				want = append(want, register(r))
			}
			mark := len(w.all())
			w.publish(gorouter.SubjectStart, announce("gorouter-1", 3600))
			Eventually(func() []message { return w.after(mark) }).Should(ContainElements(want...))
		})

		It("reports what it does in opi's metrics", func() {
			a := registration("10.0.0.1", 8080, "a.example.com")
			e.Set("a", a, time.Now().Add(-time.Hour))
			r := run(e)
			Eventually(w.registers(a)).Should(Equal(1))
			Eventually(func() string { return scrape(m) }).Should(And(
				ContainSubstring(metricLine("opi_gorouter_registrations", 1)),
				ContainSubstring(metricLine("opi_nats_connected", 1)),
				ContainSubstring(metricLine(`opi_nats_messages_sent_total{subject="router.register"}`, 1)),
				ContainSubstring(metricLine(`opi_nats_messages_sent_total{subject="router.greet"}`, 1)),
				// Ready an hour before it was first registered: beyond the last bucket.
				ContainSubstring(metricLine(`opi_gorouter_registration_delay_seconds_bucket{le="120"}`, 0)),
				ContainSubstring(metricLine("opi_gorouter_registration_delay_seconds_count", 1)),
			))
			// A later change of the same instance is not a second first registration.
			e.Set("a", registration("10.0.0.1", 8080, "a.example.com", "b.example.com"), time.Now())
			e.Set("b", registration("10.0.0.2", 8080, "b.example.com"), time.Now())
			Eventually(func() string { return scrape(m) }).Should(And(
				ContainSubstring(metricLine("opi_gorouter_registrations", 2)),
				ContainSubstring(metricLine(`opi_nats_messages_sent_total{subject="router.register"}`, 3)),
				ContainSubstring(metricLine("opi_gorouter_registration_delay_seconds_count", 2)),
			))
			r.stop()
			Expect(scrape(m)).To(And(
				ContainSubstring(metricLine("opi_gorouter_registrations", 0)),
				ContainSubstring(metricLine("opi_nats_connected", 0)),
			))
		})

		It("names its connection opi, for NATS' monitoring", func() {
			run(e)
			Eventually(w.greets).Should(Equal(1))
			Expect(srv.ClientNames()).To(ContainElement("opi"))
		})

		It("refuses a second Run while one runs", func() {
			run(e)
			Eventually(w.greets).Should(Equal(1))
			Expect(e.Run(context.Background())).To(MatchError(ContainSubstring("already running")))
		})

		It("leaves no goroutine of its own or of nats.go once Run returned", func() {
			a := registration("10.0.0.1", 8080, "a.example.com")
			e.Set("a", a, time.Time{})
			r := run(e)
			Eventually(w.registers(a)).Should(Equal(1))
			w.nc.Close()
			r.stop()
			Eventually(leftGoroutines).Should(BeEmpty())
		})
	})

	Context("with a server that wants a user and a password", func() {
		var passwordFile string

		BeforeEach(func() {
			var err error
			srv, err = natsserver.Start(natsserver.Options{Users: map[string]string{"opi": "opi-s3cret", "watcher": "w"}})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(srv.Shutdown)
			w = watch(srv.URL(), nats.UserInfo("watcher", "w"))
			passwordFile = filepath.Join(GinkgoT().TempDir(), "password")
			Expect(os.WriteFile(passwordFile, []byte("opi-s3cret\n"), 0o600)).To(Succeed())
		})

		DescribeTable("connects with them, and never logs the password",
			func(configure func() gorouter.Config) {
				cfg = configure()
				cfg.DefaultRegisterInterval = time.Hour
				e = newEmitter()
				a := registration("10.0.0.1", 8080, "a.example.com")
				e.Set("a", a, time.Time{})
				r := run(e)
				Eventually(w.registers(a)).Should(Equal(1))
				r.stop()
				Expect(string(logger.Buffer().Contents())).NotTo(ContainSubstring("opi-s3cret"))
			},
			Entry("in the URL", func() gorouter.Config {
				return gorouter.Config{URLs: []string{strings.Replace(srv.URL(), "nats://", "nats://opi:opi-s3cret@", 1)}}
			}),
			Entry("in their own keys", func() gorouter.Config {
				return gorouter.Config{URLs: []string{srv.URL()}, User: "opi", Password: "opi-s3cret"}
			}),
			Entry("the password from a file", func() gorouter.Config {
				return gorouter.Config{URLs: []string{srv.URL()}, User: "opi", PasswordFile: passwordFile}
			}),
		)

		It("keeps trying with a refused password, counting the errors, and returns none", func() {
			cfg = gorouter.Config{URLs: []string{srv.URL()}, User: "opi", Password: "wrong-s3cret"}
			e = newEmitter()
			e.Set("a", registration("10.0.0.1", 8080, "a.example.com"), time.Time{})
			r := run(e)
			Eventually(func() string { return scrape(m) }).Should(MatchRegexp(`opi_nats_errors_total\{kind="connect"\} [1-9]`))
			Expect(scrape(m)).To(ContainSubstring(metricLine("opi_nats_connected", 0)))
			r.stop()
			Expect(w.all()).To(BeEmpty())
			Expect(e.Len()).To(Equal(1))
			Expect(string(logger.Buffer().Contents())).NotTo(ContainSubstring("wrong-s3cret"))
		})

		// The server lets opi in again only once the new watcher subscribed: what opi sends when
		// it is back cannot overtake the watcher.
		restart := func() *watcher {
			GinkgoHelper()
			srv.Shutdown()
			Expect(srv.SetUsers(map[string]string{"watcher": "w"})).To(Succeed())
			Expect(srv.Restart()).To(Succeed())
			back := watch(srv.URL(), nats.UserInfo("watcher", "w"))
			Expect(srv.SetUsers(map[string]string{"opi": "opi-s3cret", "watcher": "w"})).To(Succeed())
			return back
		}

		It("re-sends everything after NATS restarted", func() {
			cfg = gorouter.Config{URLs: []string{srv.URL()}, User: "opi", PasswordFile: passwordFile, DefaultRegisterInterval: time.Hour}
			e = newEmitter()
			a, b := registration("10.0.0.1", 8080, "a.example.com"), registration("10.0.0.2", 8080, "b.example.com")
			e.Set("a", a, time.Time{})
			e.Set("b", b, time.Time{})
			run(e)
			Eventually(w.all).Should(ConsistOf(greet, register(a), register(b)))
			w.nc.Close()

			back := restart()
			Eventually(back.all).Should(ConsistOf(greet, register(a), register(b)))
			Eventually(func() string { return scrape(m) }).Should(And(
				MatchRegexp(`opi_nats_errors_total\{kind="disconnect"\} 1\n`),
				ContainSubstring(metricLine("opi_nats_connected", 1)),
			))
		})

		It("keeps what changes while NATS is down, and sends it when NATS is back", func() {
			cfg = gorouter.Config{URLs: []string{srv.URL()}, User: "opi", Password: "opi-s3cret", DefaultRegisterInterval: time.Hour}
			e = newEmitter()
			a, b := registration("10.0.0.1", 8080, "a.example.com"), registration("10.0.0.2", 8080, "b.example.com")
			e.Set("a", a, time.Time{})
			run(e)
			Eventually(w.all).Should(ConsistOf(greet, register(a)))
			w.nc.Close()
			srv.Shutdown()
			Eventually(func() string { return scrape(m) }).Should(ContainSubstring(metricLine("opi_nats_connected", 0)))

			// Down: a Delete and a Set are kept, and counted as not sent.
			e.Delete("a")
			e.Set("b", b, time.Time{})
			Expect(scrape(m)).To(MatchRegexp(`opi_nats_errors_total\{kind="publish"\} 2\n`))

			Expect(srv.SetUsers(map[string]string{"watcher": "w"})).To(Succeed())
			Expect(srv.Restart()).To(Succeed())
			back := watch(srv.URL(), nats.UserInfo("watcher", "w"))
			Expect(srv.SetUsers(map[string]string{"opi": "opi-s3cret", "watcher": "w"})).To(Succeed())
			// The unregister kept comes first, then the table.
			Eventually(back.all).Should(Equal([]message{greet, unregister(a), register(b)}))
		})
	})

	Context("with a server that wants TLS and a client certificate", func() {
		var caFile, certFile, keyFile string

		BeforeEach(func() {
			dir := GinkgoT().TempDir()
			ca, err := pki.NewCA("nats-ca")
			Expect(err).NotTo(HaveOccurred())
			caFile, err = ca.WriteCert(dir, "ca")
			Expect(err).NotTo(HaveOccurred())
			serverPair, err := ca.Server("nats")
			Expect(err).NotTo(HaveOccurred())
			serverCert, serverKey, err := serverPair.Write(dir, "server")
			Expect(err).NotTo(HaveOccurred())
			clientPair, err := ca.Client("opi")
			Expect(err).NotTo(HaveOccurred())
			certFile, keyFile, err = clientPair.Write(dir, "opi")
			Expect(err).NotTo(HaveOccurred())
			watcherPair, err := ca.Client("watcher")
			Expect(err).NotTo(HaveOccurred())
			watcherCert, watcherKey, err := watcherPair.Write(dir, "watcher")
			Expect(err).NotTo(HaveOccurred())

			srv, err = natsserver.Start(natsserver.Options{TLS: &natsserver.TLS{CertFile: serverCert, KeyFile: serverKey, ClientCAFile: caFile}})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(srv.Shutdown)
			Expect(srv.URL()).To(HavePrefix("tls://"))
			w = watch(srv.URL(), nats.RootCAs(caFile), nats.ClientCert(watcherCert, watcherKey))
		})

		It("connects with opi's client certificate", func() {
			cfg = gorouter.Config{URLs: []string{srv.URL()}, CAFile: caFile, CertFile: certFile, KeyFile: keyFile, DefaultRegisterInterval: time.Hour}
			e = newEmitter()
			a := registration("10.0.0.1", 8080, "a.example.com")
			e.Set("a", a, time.Time{})
			run(e)
			Eventually(w.all).Should(Equal([]message{greet, register(a)}))
		})

		It("is refused without one, and keeps trying", func() {
			cfg = gorouter.Config{URLs: []string{srv.URL()}, CAFile: caFile, DefaultRegisterInterval: time.Hour}
			e = newEmitter()
			e.Set("a", registration("10.0.0.1", 8080, "a.example.com"), time.Time{})
			r := run(e)
			Eventually(func() string { return scrape(m) }).Should(ContainSubstring(`opi_nats_errors_total{kind="connect"}`))
			r.stop()
			Expect(w.all()).To(BeEmpty())
		})
	})
})

// leftGoroutines are the stacks of goroutines running the emitter's or nats.go's code.
func leftGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var left []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/nats-io/nats.go.") || strings.Contains(g, "github.com/opi-bridge/opi/gorouter.") {
			left = append(left, g)
		}
	}
	return left
}
