package main

import (
	"encoding/json"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/localkube"
)

var _ = Describe("phaseCost", func() {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	snap := func(at time.Duration, opiCPU, adds, getCount float64) componentSnapshot {
		return componentSnapshot{
			At:          t0.Add(at),
			CPU:         map[string]float64{componentOpi: opiCPU, localkube.APIServer: 2 * opiCPU},
			MachineBusy: 3 * opiCPU,
			API:         map[string]sumCount{"GET deployments": {Sum: getCount / 100, Count: getCount}},
			APICodes:    map[string]float64{"200": getCount},
			Queues:      map[string]queueStats{"deployment": {Adds: adds, Depth: adds / 10, Work: sumCount{Sum: adds / 1000, Count: adds}}},
		}
	}

	It("adds up the growth of separate stretches and leaves out what happened between them", func() {
		var c phaseCost
		c.add(snap(0, 1, 10, 100), snap(2*time.Second, 3, 30, 300))
		// Between the stretches: 100 s of CPU that belong to no stretch of the phase.
		c.add(snap(10*time.Second, 103, 130, 1300), snap(11*time.Second, 104, 150, 1400))
		d, ok := c.delta()
		Expect(ok).To(BeTrue())
		Expect(c.stretches).To(Equal(2))
		Expect(d.Seconds).To(BeNumerically("~", 3, 1e-9))
		Expect(d.CPU).To(ConsistOf(
			cpuCost{Component: localkube.APIServer, Seconds: 6, Share: 2.0 / 3},
			cpuCost{Component: componentOpi, Seconds: 3, Share: 1.0 / 3},
		))
		Expect(d.MachineBusy).To(BeNumerically("~", 9, 1e-9))
		Expect(d.API).To(HaveLen(1))
		Expect(d.API[0].Count).To(Equal(300))
		Expect(d.APICodes).To(Equal(map[string]int{"200": 300}))
		Expect(d.Queues).To(HaveLen(1))
		Expect(d.Queues[0].Adds).To(Equal(40))
		Expect(d.Queues[0].Depth).To(Equal(15), "the depth at the end of the last stretch")
	})

	It("skips a process that restarted within a stretch", func() {
		var c phaseCost
		before, after := snap(0, 5, 0, 0), snap(time.Second, 1, 0, 0)
		after.CPU[localkube.APIServer] = 12
		c.add(before, after)
		d, _ := c.delta()
		Expect(d.CPU).To(ConsistOf(cpuCost{Component: localkube.APIServer, Seconds: 2, Share: 1}))
	})

	It("has no delta without a stretch", func() {
		var c phaseCost
		_, ok := c.delta()
		Expect(ok).To(BeFalse())
	})
})

var _ = Describe("the report", func() {
	It("checks the RSS and GET /apps targets at 1,000 and 10,000 apps only, against the nearest", func() {
		for _, x := range []struct {
			n, at   int
			checked bool
		}{{1000, 1000, true}, {10000, 10000, true}, {300, 1000, false}, {3000, 1000, false}, {6000, 10000, false}} {
			at, checked := targetApps(x.n)
			Expect([]any{at, checked}).To(Equal([]any{x.at, x.checked}), "n = %d", x.n)
		}

		r := newResults(config{n: 1000, tune: true})
		r.Peak, r.ListSpeedup = 50, 120
		Expect(r.RSSTargetMB).To(Equal(45.0))
		Expect(r.notes()).To(ContainElement(ContainSubstring("peak RSS is 50.0 MB at 1000 apps (target ≤ 45 MB)")))
		Expect(r.notes()).NotTo(ContainElement(ContainSubstring("faster than a live LIST")))

		small := newResults(config{n: 300})
		small.Peak, small.ListSpeedup = 50, 10
		Expect(small.Tuning).To(Equal("defaults"))
		Expect(small.notes()).NotTo(ContainElement(ContainSubstring("Missed: opi's peak RSS")))
		Expect(small.table()).To(ContainSubstring("≤ 45 MB at 1000 apps (not checked at N = 300)"))
	})

	It("shows where the time went per phase, with the busy queues only, and each process's CPU per desire in the first and last batch", func() {
		r := newResults(config{n: 1000, tune: true})
		r.Batches = []batchRecord{
			{Batch: 1, Apps: 500, Count: 490, CPUMsPerApp: map[string]float64{componentOpi: 2, localkube.APIServer: 10}},
			{Batch: 2, Apps: 1000, Count: 500, CPUMsPerApp: map[string]float64{componentOpi: 2.5, localkube.APIServer: 14}},
		}
		r.Where = []phaseDelta{{Phase: "desire through opi (its batches)", Stretches: 2, componentDelta: componentDelta{
			Seconds: 20,
			CPU:     []cpuCost{{Component: localkube.APIServer, Seconds: 12}, {Component: componentOpi, Seconds: 2}},
			API:     []callCost{{Call: "POST services", Count: 990, Seconds: 40}},
			Queues: []queueCost{
				{Name: "deployment", Adds: 3000, MeanWaitMs: 500, MeanWorkMs: 20, WaitSecs: 1500, WorkSecs: 60},
				{Name: "cronjob", Adds: 1, WaitSecs: 0.001},
			},
		}}}
		Expect(r.batchCPUSplit()).To(Equal("opi 2.0 → 2.5; apiserver 10.0 → 14.0 (batch 1 at 500 apps → batch 2 at 1000 apps)"))
		w := r.whereSection()
		Expect(w).To(ContainSubstring("| desire through opi (its batches) (2 stretches) | 20.0 | opi 2.0, apiserver 12.0, machine 0.0 | POST services 990, 40.0 | deployment 3000, 500/20 |"))
		Expect(w).NotTo(ContainSubstring("cronjob"))
		Expect(r.report()).To(ContainSubstring("Where the time went"))

		line, err := r.jsonLine()
		Expect(err).NotTo(HaveOccurred())
		var back map[string]any
		Expect(json.Unmarshal([]byte(line), &back)).To(Succeed())
		Expect(back).To(HaveKeyWithValue("control_plane_tuning", "large-cluster"))
		Expect(back["where_the_time_went"]).To(ContainElement(HaveKeyWithValue("phase", "desire through opi (its batches)")))
		Expect(back["where_the_time_went"]).To(ContainElement(HaveKey("queues")))
	})
})

var _ = Describe("opi's refused requests", func() {
	It("are counted by verb, resource and code, without the Leases'", func() {
		m := metricsSnapshot{
			`opi_kube_api_refusals_total{code="409",resource="endpointslices",verb="create"}`: 43,
			`opi_kube_api_refusals_total{code="none",resource="pods",verb="list"}`:            1,
			`opi_kube_api_refusals_total{code="409",resource="leases",verb="update"}`:         2,
			`opi_kube_api_requests_total{resource="endpointslices",verb="create"}`:            1033,
		}
		Expect(m.refusals()).To(Equal(map[string]int{"create endpointslices 409": 43, "list pods none": 1}))
	})
})
