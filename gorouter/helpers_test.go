package gorouter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"sync"

	"github.com/nats-io/nats.go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/gorouter"
	"github.com/opi-bridge/opi/metrics"
)

// message is one message a watcher received.
type message struct {
	Subject string
	Body    string
}

func (m message) String() string { return m.Subject + " " + m.Body }

// watcher is what gorouter sees: every message on router.*, in order.
type watcher struct {
	nc   *nats.Conn
	mu   sync.Mutex
	msgs []message
}

// watch connects to url and subscribes to router.*; the subscription is in place on return.
func watch(url string, options ...nats.Option) *watcher {
	GinkgoHelper()
	nc, err := nats.Connect(url, options...)
	Expect(err).NotTo(HaveOccurred())
	w := &watcher{nc: nc}
	_, err = nc.Subscribe("router.*", func(m *nats.Msg) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.msgs = append(w.msgs, message{Subject: m.Subject, Body: string(m.Data)})
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(nc.Flush()).To(Succeed())
	DeferCleanup(nc.Close)
	return w
}

// all is every message received so far.
func (w *watcher) all() []message {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.msgs)
}

// count is how many times the message was received.
func (w *watcher) count(subject string, body []byte) int {
	n := 0
	for _, m := range w.all() {
		if m.Subject == subject && m.Body == string(body) {
			n++
		}
	}
	return n
}

// registers is how many times r was registered.
func (w *watcher) registers(r gorouter.Registration) func() int {
	return func() int { return w.count(gorouter.SubjectRegister, r.Encode()) }
}

// greets is how many greets opi sent.
func (w *watcher) greets() int { return w.count(gorouter.SubjectGreet, nil) }

// after is what was received from the index-th message on.
func (w *watcher) after(index int) []message {
	all := w.all()
	return all[min(index, len(all)):]
}

// publish sends a message as a gorouter would, and waits until the server has it.
func (w *watcher) publish(subject string, body []byte) {
	GinkgoHelper()
	Expect(w.nc.Publish(subject, body)).To(Succeed())
	Expect(w.nc.Flush()).To(Succeed())
}

// answerGreets answers every router.greet as a gorouter with the interval would.
func (w *watcher) answerGreets(id string, intervalSeconds int) {
	GinkgoHelper()
	_, err := w.nc.Subscribe(gorouter.SubjectGreet, func(m *nats.Msg) {
		_ = m.Respond(announce(id, intervalSeconds))
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(w.nc.Flush()).To(Succeed())
}

// announce is the body of router.start and of a greet's reply.
func announce(id string, intervalSeconds int) []byte {
	b, _ := json.Marshal(map[string]any{"id": id, "hosts": []string{"10.0.16.4"},
		"minimumRegisterIntervalInSeconds": intervalSeconds, "pruneThresholdInSeconds": 120})
	return b
}

func register(r gorouter.Registration) message {
	return message{Subject: gorouter.SubjectRegister, Body: string(r.Encode())}
}

func unregister(r gorouter.Registration) message {
	return message{Subject: gorouter.SubjectUnregister, Body: string(r.Encode())}
}

// registration is an instance's registration of one route.
func registration(host string, port uint16, uris ...string) gorouter.Registration {
	return gorouter.Registration{
		Host: host, Port: port, URIs: uris, App: "app-guid",
		PrivateInstanceID: "instance-" + host, PrivateInstanceIndex: "0",
		Tags: map[string]string{"component": "opi", "app_id": "app-guid"},
	}
}

// running is an Emitter's Run in a goroutine; stop ends it and waits for it.
type running struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
}

func run(e *gorouter.Emitter) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- e.Run(ctx) }()
	DeferCleanup(r.stop)
	return r
}

func (r *running) stop() {
	GinkgoHelper()
	r.once.Do(func() {
		r.cancel()
		Eventually(r.done).Should(Receive(BeNil()))
	})
}

// scrape is the metrics in Prometheus text format.
func scrape(m *metrics.Metrics) string {
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// metricLine is `name value`, for ContainSubstring.
func metricLine(name string, value any) string { return fmt.Sprintf("%s %v\n", name, value) }
