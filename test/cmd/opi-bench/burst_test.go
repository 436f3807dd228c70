package main

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("reads under a burst", func() {
	// measured is a GET /apps burst on 2 CPUs: opi 4 ms of CPU per sequential call allows
	// 500 calls/s; 50 callers on 2 CPUs wait about 25 sequential calls' time.
	measured := func() burstRead {
		return burstRead{
			Read: readApps, Apps: 1000, CPUs: 2, SeqCalls: 300, SeqSeconds: 5.1, SeqP50: 2, SeqP99: 3,
			SeqOpiCPUMs: 4, SeqBenchCPUMs: 1,
			Callers: 50, Seconds: 20.2, Calls: 8484, PerSecond: 420, P50: 40, P99: 60, Max: 100, Bytes: 462000,
			OpiCores: 1.6, BenchCores: 0.3, BenchCPUMs: 0.7,
		}
	}

	It("compares the throughput with what the CPUs allow at the sequential CPU per call, the p99 with callers ÷ CPUs sequential p50s", func() {
		b := measured()
		b.derive()
		Expect(b.Allowed).To(BeNumerically("~", 500, 1e-9), "2 CPUs ÷ 4 ms")
		Expect(b.Share).To(BeNumerically("~", 0.84, 1e-9))
		Expect(b.ShareWithBench).To(BeNumerically("~", 1.05, 1e-9), "2 CPUs ÷ (4 + 1) ms = 400/s")
		Expect(b.P99BoundMs).To(BeNumerically("~", 62.5, 1e-9), "1.25 × 50 ÷ 2 × 2 ms")
		Expect(b.TimeoutMs).To(Equal(60000.0))
		Expect(b.DriverSaturated).To(BeFalse(), "0.3 cores of 2")
		Expect(b.misses()).To(BeEmpty())

		b.CPUs = 4
		b.derive()
		Expect(b.Allowed).To(BeNumerically("~", 1000, 1e-9), "the machine's CPUs, not a literal 2")
		Expect(b.P99BoundMs).To(BeNumerically("~", 31.25, 1e-9))
		Expect(b.misses()).To(ConsistOf(
			ContainSubstring("420.0 calls/s, 0.42 × the 1000.0/s 4 CPUs allow at opi's sequential 4.000 ms CPU per call (target ≥ 0.8)"),
			ContainSubstring("p99 60.0 ms over 1.25 × 50 callers ÷ 4 CPUs × the sequential p50 2.00 ms = 31.2 ms"),
		))
	})

	It("misses on a call over CC's timeout, an API server request or a failed call, and says when the run itself took a quarter of the CPUs", func() {
		b := measured()
		b.Max, b.APIRequests, b.ByVerb = 61000, 2, map[string]int{"list deployments": 2}
		b.Errors, b.FirstError = 1, "GET /apps: 503, 10 bytes"
		b.BenchCores = 0.5
		b.derive()
		Expect(b.DriverSaturated).To(BeTrue())
		Expect(b.misses()).To(ConsistOf(
			"GET /apps under 50 callers: a call took 61.0 s, over CC's 1m0s timeout",
			"GET /apps under a burst made 2 API server requests (list deployments 2)",
			"1 of the GET /apps calls under 50 callers failed, the first with: GET /apps: 503, 10 bytes",
		))
		Expect(burstRead{}.misses()).To(BeEmpty(), "a run without the phase misses nothing")
	})

	It("calls back to back until both the least calls and the least wall time are done, counting failures apart", func() {
		var (
			mu   sync.Mutex
			seen []int
		)
		res := closedLoop(context.Background(), 1, 7, 0, func(_ context.Context, i int) error {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, i)
			if i == 3 {
				return errors.New("boom")
			}
			return nil
		})
		Expect(seen).To(Equal([]int{0, 1, 2, 3, 4, 5, 6}), "one caller: in order")
		Expect(res.durs).To(HaveLen(6))
		Expect(res.errors).To(Equal(1))
		Expect(res.firstError).To(Equal("boom"))

		seen = nil
		res = closedLoop(context.Background(), 4, 20, 0, func(_ context.Context, i int) error {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, i)
			return nil
		})
		Expect(seen).To(ConsistOf(func() []any {
			var want []any
			for i := range 20 {
				want = append(want, i)
			}
			return want
		}()...), "four callers share the calls: each index once")
		Expect(res.durs).To(HaveLen(20))
		Expect(maxMs([]time.Duration{time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond})).To(Equal(3.0))
	})

	It("shows both reads in the run's table, notes and JSON line, and in the recorded runs' tables", func() {
		r := newResults(config{n: 1000})
		r.BurstApps = measured()
		r.BurstApps.derive()
		r.BurstInstances = measured()
		r.BurstInstances.Read, r.BurstInstances.PerSecond, r.BurstInstances.BenchCores = readInstances, 300, 0.6
		r.BurstInstances.derive()

		table := r.table()
		Expect(table).To(ContainSubstring("| GET /apps at N, one caller (300 calls in 5.1 s) | p50 2.00 ms, p99 3.00 ms; opi 4.000 ms CPU per call (this run 1.000 ms) |"))
		Expect(table).To(ContainSubstring("| **GET /apps at N, 50 closed-loop callers: throughput ÷ what the CPUs allow at opi's sequential CPU per call** | " +
			"**0.84 (420.0 calls/s of the 500.0/s 2 CPUs allow at 4.000 ms CPU per call); p50 40.0, p99 60.0 ms (bound 62.5), max 100.0 ms; 0 API requests; 50 callers, 20 s**; " +
			"opi 1.60 cores, this run 0.30 cores (0.700 ms per call; counting it too: 1.05); others 0 % of the CPUs | " +
			"≥ 0.8; p99 ≤ 1.25 × callers ÷ CPUs × the sequential p50; max ≤ 1m0s; 0 requests | yes |"))
		Expect(table).To(ContainSubstring("| **GET /apps/{guid}/{version}/instances at N, 50 closed-loop callers"))
		Expect(table).To(MatchRegexp(`0\.60 \(300\.0 calls/s.*\| \*\*no\*\* \|`))
		notes := r.notes()
		Expect(notes).To(ContainElement("Missed: GET /apps/{guid}/{version}/instances under 50 callers: 300.0 calls/s, 0.60 × the 500.0/s 2 CPUs allow at opi's sequential 4.000 ms CPU per call (target ≥ 0.8)."))
		Expect(notes).To(ContainElement(HavePrefix("This run itself used 0.60 of the 2 CPUs reading the answers of the GET /apps/{guid}/{version}/instances burst")))
		Expect(notes).NotTo(ContainElement(ContainSubstring("reading the answers of the GET /apps burst")))

		line, err := r.jsonLine()
		Expect(err).NotTo(HaveOccurred())
		var back map[string]any
		Expect(json.Unmarshal([]byte(line), &back)).To(Succeed())
		Expect(back["reads_burst_get_apps"]).To(HaveKeyWithValue("throughput_share_of_allowed", BeNumerically("~", 0.84, 1e-9)))
		Expect(back["reads_burst_instances"]).To(HaveKeyWithValue("read", readInstances))

		out := generatedTables(mustRuns(line, `{"date":"2026-11-30 20:00 UTC","n":1000,"backend":"deployments","opi_desire":{"per_second":70}}`))
		apps := tableOf(out, burstFigure(readApps, nil).title)
		Expect(apps).To(ContainSubstring("Target: ≥ 0.8; p99 ≤ 1.25 × callers ÷ CPUs × the sequential p50; no call over CC's 1m0s timeout; 0 API requests."))
		Expect(apps).To(ContainSubstring("| 1000 | 0.84 (420.0 calls/s of the 500.0/s 2 CPUs allow at 4.000 ms CPU per call); p50 40.0, p99 60.0 ms (bound 62.5), max 100.0 ms; 0 API requests; 50 callers, 20 s | yes |"))
		Expect(apps).To(HaveSuffix("| 1 |\n"), "the run without the phase is not counted")
		Expect(tableOf(out, burstFigure(readInstances, nil).title)).To(ContainSubstring("| 1000 | 0.60 (300.0 calls/s"))
	})

	It("takes the burst's flags, and no callers to leave it out", func() {
		c, err := parseFlags(nil)
		Expect(err).NotTo(HaveOccurred())
		Expect([]any{c.readCallers, c.readBurst, c.readSeqCalls, c.readSeqMin}).To(Equal([]any{50, 20 * time.Second, 300, 5 * time.Second}))
		_, err = parseFlags([]string{"-read-callers", "0", "-read-burst", "0"})
		Expect(err).NotTo(HaveOccurred())
		for _, args := range [][]string{{"-read-callers", "-1"}, {"-read-burst", "0"}, {"-read-seq-calls", "0"}} {
			_, err := parseFlags(args)
			Expect(err).To(MatchError(ContainSubstring("-read-callers")), "%v", args)
		}
	})
})

var _ = Describe("the API server requests of a read window", func() {
	It("leaves out the janitor's sweep, marked by its LIST of Secrets, and counts any other request", func() {
		reads, janitor, verbs := readRequests(map[string]float64{
			"list secrets": 1, "list services": 1, "list ingresses": 1, "watch pods": 3, "get deployments": 2,
		})
		Expect([]float64{reads, janitor}).To(Equal([]float64{2, 3}))
		Expect(verbs).To(Equal(map[string]int{"list secrets": 1, "list services": 1, "list ingresses": 1, "get deployments": 2}))

		reads, janitor, _ = readRequests(map[string]float64{"list ingresses": 1, "list services": 1})
		Expect([]float64{reads, janitor}).To(Equal([]float64{1, 1}), "no sweep in the window: a LIST of Ingresses is the reads'")
	})
})
