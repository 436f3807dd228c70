package main

import (
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("the nats run (-routing nats)", func() {
	const natsLine = `{"date":"2026-12-01T16:10:00Z","n":1000,"backend":"deployments","routing":"nats",` +
		`"nats_desire":{"per_second":21.5,"errors":0},"nats_floor_one_deployment":{"per_second":86},"nats_desire_ratio_one_deployment":0.25,"opi_desire_api_requests_per_app":2,` +
		`"nats_floor_same_objects":{"per_second":43},"desire_ratio_same_objects":0.5,` +
		`"nats_ready_to_registered":{"instances":1000,"p50_ms":1.2,"p99_ms":35,"condition_p50_ms":480,"condition_p99_ms":990},` +
		`"nats_burst":{"apps":1000,"last_registered_s":52.3,"floor_all_running_s":31.4,"ratio":1.67},` +
		`"nats_steady":{"apps":1000,"instances":10000,"registered":10000,"unique_pod_ips":10000,"interval_s":5,"window_s":30,"register_per_s":2000,"opi_cpu_cores":0.15,"opi_cpu_s":4.5,"opi_rss_mb":90.5}}`
	const lrpLine = `{"date":"2026-12-01 01:28 UTC","n":1000,"backend":"deployments","opi_desire":{"per_second":53.1,"p50_ms":888,"p99_ms":1728},"opi_desire_api_requests_per_app":4,"elapsed_s":600,"desire_ratio_same_objects":0.95}`

	tables := func(lines ...string) string {
		rs, err := readRuns(strings.NewReader(strings.Join(lines, "\n") + "\n"))
		Expect(err).NotTo(HaveOccurred())
		return generatedTables(rs)
	}
	row := func(out, title string) string {
		i := strings.Index(out, "### "+title+"\n")
		ExpectWithOffset(1, i).To(BeNumerically(">=", 0), "no table %q in:\n%s", title, out)
		s := out[i:]
		_, after, _ := strings.Cut(s, "| 1000 | ")
		line, _, _ := strings.Cut(after, "\n")
		return line
	}

	It("puts a nats run in the nats tables only, and the other LRP runs in none of them", func() {
		out := tables(natsLine, lrpLine)
		Expect(row(out, natsFigures[0].title)).To(Equal("0.25 (21.5 ÷ 86.0 apps/s); ÷ the same-objects floor 0.50 (43.0 apps/s); 2.00 requests per desire | 2026-12-01 16:10 UTC | 1 |"))
		Expect(tableOf(out, "Desire throughput, opi ÷ the same-objects floor")).To(HaveSuffix(
			"| 1000 | 0.95 | yes | 2026-12-01 01:28 UTC | 1 |\n| 1000 (nats) | 0.50 | **no** | 2026-12-01 16:10 UTC | 1 |\n"),
			"the one table of the same-objects ratio holds every routing mode, a row each")
		Expect(row(out, natsFigures[1].title)).To(Equal("1 / 35 ms from the run's pod watch (1000 instances); 480 / 990 ms from the Ready condition's whole-second time | 2026-12-01 16:10 UTC | 1 |"))
		Expect(row(out, natsFigures[2].title)).To(Equal("52.3 s against 31.4 s (1.67 ×) | 2026-12-01 16:10 UTC | 1 |"))
		Expect(row(out, natsFigures[3].title)).To(Equal("10000 instances (1000 apps × 10) at 5 s: 2000 messages/s, opi 0.150 cores (4.5 CPU s in 30 s), 90.5 MB; 10000 distinct pod IPs | 2026-12-01 16:10 UTC | 1 |"))
		Expect(row(out, "API server requests per desire (opi; the janitor's pages during the desires included)")).To(HavePrefix("4.00 |"),
			"the LRP run's figure, not the nats run's")
		Expect(row(out, "Whole run")).To(HavePrefix("10.0 min |"))

		Expect(tables(lrpLine)).NotTo(ContainSubstring("### Routing nats"))
		older := strings.Replace(natsLine, `"desire_ratio_same_objects":0.5,`, "", 1)
		Expect(row(tables(older), natsFigures[0].title)).To(HavePrefix("0.25 (21.5 ÷ 86.0 apps/s); 2.00 requests per desire |"), "a run before the nats same-objects floor")
		Expect(tables(older)).NotTo(ContainSubstring("Desire throughput, opi ÷ the same-objects floor"))
		partial := strings.Replace(natsLine, `"registered":10000`, `"registered":4200`, 1)
		Expect(row(tables(partial), natsFigures[3].title)).To(HavePrefix("4200 of 10000 instances (1000 apps × 10; the rest not started in time) at 5 s:"))
	})

	It("lists each round's ratios of a run of several rounds (-nats-rounds)", func() {
		rounds := strings.Replace(natsLine, `"nats_steady"`, `"nats_rounds":[`+
			`{"desire_ratio_one_deployment":0.21,"desire_ratio_same_objects":0.45,"burst_ratio":1.9},`+
			`{"desire_ratio_one_deployment":0.3,"desire_ratio_same_objects":0.55,"burst_ratio":1.41}],"nats_steady"`, 1)
		out := tables(rounds)
		Expect(row(out, natsFigures[0].title)).To(HavePrefix("0.25 (21.5 ÷ 86.0 apps/s) (2 rounds: 0.21, 0.30); ÷ the same-objects floor 0.50 (43.0 apps/s) (2 rounds: 0.45, 0.55); 2.00 requests per desire |"))
		Expect(row(out, natsFigures[2].title)).To(HavePrefix("52.3 s against 31.4 s, each the rounds' mean (1.67 ×) (2 rounds: 1.90, 1.41) |"))
	})

	It("prints the same-objects floor beside the one-Deployment floor, with each call's latency", func() {
		r := natsResults{N: 1000, Concurrency: 50, Kinds: []string{"Deployment", "Secret"},
			Desire: phase{Throughput: 21.5}, FloorOne: phase{Throughput: 86}, DesireRatioOne: 0.25,
			FloorSame: phase{Throughput: 43}, DesireRatioSame: 0.5, Burst: natsBurst{FloorSameRunning: 30},
			FloorSteps: []step{{Call: "create deployment", P50: 10, P99: 20}, {Call: "create secret", P50: 5, P99: 9}}}
		Expect(r.table()).To(ContainSubstring("| same-objects floor (Deployment, Secret; in opi's order: the Deployment and what opi leaves owned by nothing at once, then the rest in parallel, owned from creation) | " +
			"43.0 apps/s; opi ÷ floor 0.50 (target ≥ 0.9); each call's p50/p99 ms: create deployment 10/20; create secret 5/9; all pods Running 30.0 s after its first create |"))
	})

	It("keeps each instance's first registration, counts every register and follows unregisters", func() {
		b := &natsBus{first: map[string]time.Time{}, live: map[string]string{}}
		reg := func(subject, id, host string) {
			b.handle(&nats.Msg{Subject: subject, Data: []byte(`{"host":"` + host + `","port":8080,"private_instance_id":"` + id + `","uris":["a.example.com"]}`)})
		}
		reg("router.register", "p1", "10.0.0.1")
		firstP1 := b.first["p1"]
		reg("router.register", "p2", "10.0.0.2")
		reg("router.register", "p1", "10.0.0.1")
		reg("router.unregister", "p2", "10.0.0.2")
		b.handle(&nats.Msg{Subject: "router.register", Data: []byte(`not json`)})
		b.handle(&nats.Msg{Subject: "router.other", Data: []byte(`{"private_instance_id":"p3"}`)})

		first, live := b.registered()
		Expect(b.registers.Load()).To(Equal(int64(3)))
		Expect(first).To(HaveLen(2))
		Expect(first["p1"]).To(Equal(firstP1), "a re-registration keeps the first time")
		Expect(live).To(Equal(map[string]string{"p1": "10.0.0.1"}))
	})

	It("measures from Ready to the first registration, leaving out instances not registered", func() {
		t0 := time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC)
		seen := map[string]time.Time{"a": t0, "b": t0, "c": t0}
		cond := map[string]time.Time{"a": t0.Add(-300 * time.Millisecond), "b": {}}
		first := map[string]time.Time{"a": t0.Add(20 * time.Millisecond), "b": t0.Add(-time.Millisecond)}
		watch, condition := readyToRegistered([]string{"a", "b", "c"}, seen, cond, first)
		Expect(watch).To(Equal([]time.Duration{20 * time.Millisecond, 0}), "c is not registered; b's watch was late: 0")
		Expect(condition).To(Equal([]time.Duration{320 * time.Millisecond}), "b has no condition time")
		last, n := lastOf([]string{"a", "b", "c"}, first)
		Expect(last).To(Equal(t0.Add(20 * time.Millisecond)))
		Expect(n).To(Equal(2))
	})

	It("takes -routing nats only, sizes the nodes for its instances, and refuses bad flags", func() {
		c, err := parseFlags([]string{"-routing", "nats", "-n", "1000"})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.podCapacity()).To(Equal(10100))
		c, err = parseFlags([]string{"-n", "1000"})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.podCapacity()).To(Equal(1100))
		Expect(c.natsWait).To(Equal(15 * time.Minute))
		for _, args := range [][]string{{"-routing", "ingress"}, {"-routing", "nats", "-tasks", "10"}, {"-routing", "nats", "-nats-instances", "0"}, {"-routing", "nats", "-nats-rounds", "0"}} {
			_, err := parseFlags(args)
			Expect(err).To(MatchError(ContainSubstring("-routing takes only nats")), "%v", args)
		}
	})
})
