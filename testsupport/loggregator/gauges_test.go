package loggregator_test

import (
	"context"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	standin "github.com/opi-bridge/opi/testsupport/loggregator"
)

var _ = Describe("the gauge readers", func() {
	gauge := func(source, instance, processID string, cpu float64) *loggregator_v2.Envelope {
		return &loggregator_v2.Envelope{
			SourceId: source, InstanceId: instance, Tags: map[string]string{"process_id": processID},
			Message: &loggregator_v2.Envelope_Gauge{Gauge: &loggregator_v2.Gauge{Metrics: map[string]*loggregator_v2.GaugeValue{
				"cpu": {Unit: "percentage", Value: cpu},
			}}},
		}
	}
	log := &loggregator_v2.Envelope{SourceId: "app", InstanceId: "0", Tags: map[string]string{"process_id": "app"},
		Message: &loggregator_v2.Envelope_Log{Log: &loggregator_v2.Log{Payload: []byte("a line")}}}

	var (
		web0, web0Again, web1 = gauge("app", "0", "app", 1), gauge("app", "0", "app", 2), gauge("app", "1", "app", 3)
		worker0               = gauge("worker", "0", "worker", 4)
		// A gauge of another process under the app guid, as opi must never send one.
		stray0 = gauge("app", "0", "worker", 5)
		envs   = []*loggregator_v2.Envelope{web0, log, worker0, web1, stray0, web0Again}
	)

	It("groups the gauges by source_id, then instance_id, in order of arrival, as CC's OPI mode reads them", func() {
		Expect(standin.GaugesBySource(envs)).To(Equal(map[string]standin.Gauges{
			"app":    {"0": {web0, stray0, web0Again}, "1": {web1}},
			"worker": {"0": {worker0}},
		}))
		Expect(standin.GaugesBySource([]*loggregator_v2.Envelope{log})).To(BeEmpty())
	})

	It("keeps, of a source, the gauges tagged with one process_id, as a Diego-shaped reader does", func() {
		Expect(standin.GaugesTagged(envs, "app", "app")).To(Equal(standin.Gauges{"0": {web0, web0Again}, "1": {web1}}))
		Expect(standin.GaugesTagged(envs, "app", "worker")).To(Equal(standin.Gauges{"0": {stray0}}))
		Expect(standin.GaugesTagged(envs, "worker", "app")).To(BeEmpty())
	})

	It("writes the gauges among envelopes out for comparison, in order", func() {
		Expect(standin.GaugesIn(envs[:3])).To(Equal([]standin.Gauge{
			{SourceID: "app", InstanceID: "0", Tags: map[string]string{"process_id": "app"},
				Values: map[string]float64{"cpu": 1}, Units: map[string]string{"cpu": "percentage"}},
			{SourceID: "worker", InstanceID: "0", Tags: map[string]string{"process_id": "worker"},
				Values: map[string]float64{"cpu": 4}, Units: map[string]string{"cpu": "percentage"}},
		}))
	})

	It("groups what a running stand-in received", func() {
		server, err := standin.Start(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(server.Stop)
		cfg, err := clientTLS(server.ClientFiles())
		Expect(err).NotTo(HaveOccurred())
		client := loggregator_v2.NewIngressClient(dialTLS(server.Addr(), cfg))
		_, err = client.Send(context.Background(), &loggregator_v2.EnvelopeBatch{Batch: envs})
		Expect(err).NotTo(HaveOccurred())

		got := server.GaugesBySource()
		Expect(got).To(HaveLen(2))
		Expect(got["app"]["0"]).To(HaveLen(3))
		Expect(got["app"]["0"][1].Tags).To(Equal(map[string]string{"process_id": "worker"}))
		Expect(got["worker"]["0"][0].GetGauge().Metrics["cpu"].Value).To(Equal(4.0))
	})
})
