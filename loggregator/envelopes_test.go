package loggregator_test

import (
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"google.golang.org/protobuf/proto"

	"github.com/opi-bridge/opi/loggregator"
)

var (
	at  = time.Date(2026, 12, 1, 12, 0, 0, 123456789, time.UTC)
	web = loggregator.Identity{
		SourceID:   "9d3e4d2c-6a45-4e1b-8f0e-2b8f1c1d2e3f",
		InstanceID: "2",
		Tags: loggregator.AppTags{
			SourceType: loggregator.ProcessSourceType("web"),
			AppID:      "9d3e4d2c-6a45-4e1b-8f0e-2b8f1c1d2e3f", AppName: "dora",
			SpaceID: "space-guid", SpaceName: "dev", OrgID: "org-guid", OrgName: "acme",
			ProcessID: "9d3e4d2c-6a45-4e1b-8f0e-2b8f1c1d2e3f", ProcessType: "web",
		}.Map(),
	}
)

// logEnvelope is a log envelope written out field by field, as the tests expect it.
func logEnvelope(ts time.Time, typ loggregator_v2.Log_Type, payload string) *loggregator_v2.Envelope {
	return &loggregator_v2.Envelope{
		Timestamp:  ts.UnixNano(),
		SourceId:   "9d3e4d2c-6a45-4e1b-8f0e-2b8f1c1d2e3f",
		InstanceId: "2",
		Tags: map[string]string{
			"source_type": "APP/PROC/WEB",
			"app_id":      "9d3e4d2c-6a45-4e1b-8f0e-2b8f1c1d2e3f", "app_name": "dora",
			"space_id": "space-guid", "space_name": "dev",
			"organization_id": "org-guid", "organization_name": "acme",
			"process_id": "9d3e4d2c-6a45-4e1b-8f0e-2b8f1c1d2e3f", "process_type": "web",
		},
		Message: &loggregator_v2.Envelope_Log{Log: &loggregator_v2.Log{Payload: []byte(payload), Type: typ}},
	}
}

func equalEnvelopes(got, want []*loggregator_v2.Envelope) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			return false
		}
	}
	return true
}

var _ = Describe("envelopes", func() {
	It("builds a log envelope with the line's timestamp, type and the instance's tags", func() {
		env := loggregator.NewLog(web, at, loggregator_v2.Log_ERR, []byte("boom"))
		Expect(proto.Equal(env, logEnvelope(at, loggregator_v2.Log_ERR, "boom"))).To(BeTrue(), env.String())
	})

	It("keeps the envelope apart from the caller's tags and payload", func() {
		tags := map[string]string{"source_type": "APP/TASK/migrate"}
		payload := []byte("x")
		env := loggregator.NewLog(loggregator.Identity{SourceID: "a", InstanceID: "0", Tags: tags}, at, loggregator_v2.Log_OUT, payload)
		tags["source_type"] = "changed"
		payload[0] = 'y'
		Expect(env.GetTags()).To(Equal(map[string]string{"source_type": "APP/TASK/migrate"}))
		Expect(env.GetLog().GetPayload()).To(Equal([]byte("x")))
	})

	It("names task logs APP/TASK/<name> and leaves empty tags out", func() {
		Expect(loggregator.TaskSourceType("db-migrate")).To(Equal("APP/TASK/db-migrate"))
		Expect(loggregator.AppTags{SourceType: "APP/TASK/db-migrate", AppID: "a"}.Map()).To(Equal(map[string]string{
			"source_type": "APP/TASK/db-migrate", "app_id": "a",
		}))
	})

	It("builds the container gauges Diego's rep sends", func() {
		id := loggregator.Identity{SourceID: "app", InstanceID: "1", Tags: map[string]string{"app_id": "app"}}
		env := loggregator.NewContainerMetrics(id, at, loggregator.Usage{
			CPUPercent: 12.5, MemoryBytes: 100 << 20, DiskBytes: 20 << 20,
			MemoryQuotaBytes: 256 << 20, DiskQuotaBytes: 1 << 30,
		})
		want := &loggregator_v2.Envelope{
			Timestamp: at.UnixNano(), SourceId: "app", InstanceId: "1",
			Tags: map[string]string{"app_id": "app"},
			Message: &loggregator_v2.Envelope_Gauge{Gauge: &loggregator_v2.Gauge{Metrics: map[string]*loggregator_v2.GaugeValue{
				"cpu":          {Unit: "percentage", Value: 12.5},
				"memory":       {Unit: "bytes", Value: 104857600},
				"disk":         {Unit: "bytes", Value: 20971520},
				"memory_quota": {Unit: "bytes", Value: 268435456},
				"disk_quota":   {Unit: "bytes", Value: 1073741824},
			}}},
		}
		Expect(proto.Equal(env, want)).To(BeTrue(), env.String())
	})
})

func mustMarshal(env *loggregator_v2.Envelope) []byte {
	b, err := proto.Marshal(env)
	Expect(err).NotTo(HaveOccurred())
	return b
}

var _ = Describe("LogEncoder", func() {
	decode := func(raw []byte) *loggregator_v2.Envelope {
		env := new(loggregator_v2.Envelope)
		Expect(proto.Unmarshal(raw, env)).To(Succeed())
		return env
	}

	It("encodes the envelope NewLog builds, for either stream, an empty line and a zero time", func() {
		enc := loggregator.NewLogEncoder(web)
		for _, c := range []struct {
			t       time.Time
			typ     loggregator_v2.Log_Type
			payload string
		}{
			{at, loggregator_v2.Log_OUT, "GET / 200"},
			{at.Add(time.Second), loggregator_v2.Log_ERR, "panic: ünïcode"},
			{at, loggregator_v2.Log_OUT, ""},
			{time.Unix(0, 0), loggregator_v2.Log_ERR, "x"},
		} {
			want := loggregator.NewLog(web, c.t, c.typ, []byte(c.payload))
			Expect(proto.Equal(decode(enc.Encode(c.t, c.typ, c.payload)), want)).To(BeTrue(), "%v", c)
		}
	})

	It("encodes an identity without tags or instance id", func() {
		id := loggregator.Identity{SourceID: "app"}
		want := loggregator.NewLog(id, at, loggregator_v2.Log_OUT, []byte("line"))
		Expect(proto.Equal(decode(loggregator.NewLogEncoder(id).Encode(at, loggregator_v2.Log_OUT, "line")), want)).To(BeTrue())
	})

	It("replaces the bytes of a tag that are not UTF-8, so that the envelope decodes", func() {
		id := loggregator.Identity{SourceID: "app", Tags: map[string]string{"app_name": "bad\xffname"}}
		env := decode(loggregator.NewLogEncoder(id).Encode(at, loggregator_v2.Log_OUT, "line"))
		Expect(env.Tags).To(Equal(map[string]string{"app_name": "bad\uFFFDname"}))
	})
})
