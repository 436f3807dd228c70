package main

import (
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/localkube"
)

var _ = Describe("the recorded runs and docs/benchmarks.md's tables", func() {
	const doc = "# Benchmarks\n\nMethod.\n\n" + generatedBegin + "\nstale\n" + generatedEnd + "\n\n## Findings\n\nText.\n"

	runs, section := mustRuns, tableOf

	It("keeps the committed tables equal to what opi-bench report makes from the committed runs", func() {
		root, err := localkube.RepoRoot()
		Expect(err).NotTo(HaveOccurred())
		runsPath, docPath := filepath.Join(root, "docs", "benchmarks", "runs.jsonl"), filepath.Join(root, "docs", "benchmarks.md")
		Expect(regenerate(runsPath, docPath, true)).To(Succeed(), "run `make bench-report` and commit docs/benchmarks.md")
	})

	It("shows per N the latest run by date, whatever the order of the lines, with the count of runs", func() {
		out := generatedTables(runs(
			`{"date":"2026-11-30 20:00 UTC","n":1000,"backend":"deployments","opi_desire":{"per_second":70,"p50_ms":600,"p99_ms":900}}`,
			`{"date":"2026-12-01 01:28 UTC","n":1000,"backend":"deployments","opi_desire":{"per_second":53.1,"p50_ms":888,"p99_ms":1728}}`,
			`{"date":"2026-11-30 22:08 UTC","n":1000,"backend":"deployments","opi_desire":{"per_second":67.9,"p50_ms":704,"p99_ms":1500}}`,
			`{"date":"2026-11-30 17:35 UTC","n":300,"backend":"statefulsets","opi_desire":{"per_second":22.9,"p50_ms":1747,"p99_ms":3829}}`,
		))
		Expect(section(out, "Desire through opi, all batches (PUT /apps/{process_guid}, concurrency 50)")).To(Equal("\n" +
			"| N | latest | date | runs |\n| ---: | --- | --- | ---: |\n" +
			"| 300 (statefulsets) | 22.9 apps/s (p50 1747 ms, p99 3829 ms) | 2026-11-30 17:35 UTC | 1 |\n" +
			"| 1000 | 53.1 apps/s (p50 888 ms, p99 1728 ms) | 2026-12-01 01:28 UTC | 3 |\n" +
			"\n† Measured by the earlier bench: one floor making opi's objects, in batches of N/10 alternating with opi's, without the quiet wait before each side.\n\n" +
			generatedEnd + "\n"))
		Expect(out).To(ContainSubstring("4 recorded runs (4 of LRPs, 0 of tasks), 2026-11-30 17:35 UTC to 2026-12-01 01:28 UTC."))
	})

	It("keeps the node agent's runs in a table of their own, apart from the LRP and task figures", func() {
		out := generatedTables(runs(
			`{"date":"2026-12-01 01:28 UTC","n":1000,"backend":"deployments","opi_desire":{"per_second":53.1,"p50_ms":888,"p99_ms":1728}}`,
			`{"date":"2026-12-01 16:00 UTC","agent":{"pods":110,"files":1000,"lines":1000000,"catch_up_s":90,"catch_up_cpu_s":40,"lines_per_cpu_s":25000,"lines_per_s":11111,"catch_up_others_cpu_share":0.5,"rss_peak_mb":90.5,"rss_steady_mb":80.25,"delay_rate_lines_per_s":500,"delay_s":30,"delay_lines":15000,"delay_p50_ms":530,"delay_p99_ms":1050,"poll_interval_ms":1000}}`,
		))
		Expect(out).To(ContainSubstring("2 recorded runs (1 of LRPs, 0 of tasks, 1 of the node agent)"))
		Expect(section(out, "Node agent (`make bench-agent`): lines per CPU second, RSS, delay line written → envelope received")).To(HavePrefix("\n" +
			"| pods, files, lines | lines per CPU second (wall lines/s) | RSS peak / steady | delay p50 / p99 (rate, poll) | others' CPU share | date |\n" +
			"| --- | ---: | --- | --- | ---: | --- |\n" +
			"| 110, 1000, 1000000 | 25000 (11111) | 90.5 / 80.2 MB | 530 / 1050 ms (500 lines/s, 1000 ms) | 50 % | 2026-12-01 16:00 UTC |\n"))
		Expect(section(out, "Desire through opi, all batches (PUT /apps/{process_guid}, concurrency 50)")).To(ContainSubstring("| 1000 | 53.1 apps/s"))
		Expect(section(out, "Desire through opi, all batches (PUT /apps/{process_guid}, concurrency 50)")).NotTo(ContainSubstring("| 0 |"))
	})

	It("keeps the SSH proxy's runs in a table of their own, every run a row, the ratio checked against its target", func() {
		out := generatedTables(runs(
			`{"date":"2026-12-01 01:28 UTC","n":1000,"backend":"deployments","opi_desire":{"per_second":53.1,"p50_ms":888,"p99_ms":1728}}`,
			`{"date":"2026-12-02 06:43 UTC","ssh":{"backend":"deployments","sessions":200,"setup_p50_ms":1817.5,"setup_p99_ms":2996.6,"setup_errors":2,"cipher":"chacha20-poly1305@openssh.com","tunnel_mb_per_s":82.64,"kubectl_mb_per_s":109.21,"tunnel_ratio":0.7567,"tunnel_cpu_s_per_gb":{"ssh-proxy":7.38,"ssh":2.4},"kubectl_cpu_s_per_gb":{"kubectl":4.8},"others_cpu_share":0.22}}`,
			`{"date":"2026-12-02 06:45 UTC","ssh":{"backend":"deployments","sessions":200,"setup_p50_ms":1799.8,"setup_p99_ms":2764.1,"setup_errors":4,"cipher":"aes128-gcm@openssh.com","tunnel_mb_per_s":106.23,"kubectl_mb_per_s":110.37,"tunnel_ratio":0.9625,"tunnel_cpu_s_per_gb":{"ssh-proxy":4.6},"kubectl_cpu_s_per_gb":{"kubectl":4.4},"others_cpu_share":0.27}}`,
			`{"date":"2026-12-02 07:30 UTC","ssh":{"backend":"deployments","sessions":200,"setup_p50_ms":1175,"setup_p99_ms":1736,"setup_errors":1,"setup_lost_outputs":5,"setup_apiserver_cuts":9,"cipher":"aes128-gcm@openssh.com","tunnel_mb_per_s":98.2,"kubectl_mb_per_s":62.7,"tunnel_ratio":1.566,"tunnel_cpu_s_per_gb":{"ssh-proxy":6.2},"kubectl_cpu_s_per_gb":{"kubectl":13.8},"others_cpu_share":0.19}}`,
		))
		Expect(out).To(ContainSubstring("4 recorded runs (1 of LRPs, 0 of tasks, 3 of the SSH proxy)"))
		Expect(section(out, "SSH proxy (`make bench-ssh`): session setup, 50 clients at once; one tunnel stream against kubectl port-forward")).To(HavePrefix("\n" +
			"| backend | setup p50 / p99 (sessions, errors, outputs lost below the proxy) | tunnel, cipher | kubectl port-forward | ratio (target ≥ 0.8) | met | CPU s per GB: tunnel; kubectl | others' CPU share | date |\n" +
			"| --- | --- | --- | --- | ---: | --- | --- | ---: | --- |\n" +
			"| deployments | 1818 / 2997 ms (200, 2) | 82.6 MB/s, chacha20-poly1305@openssh.com | 109.2 MB/s | 0.76 | **no** | ssh-proxy 7.4, ssh 2.4; kubectl 4.8 | 22 % | 2026-12-02 06:43 UTC |\n" +
			"| deployments | 1800 / 2764 ms (200, 4) | 106.2 MB/s, aes128-gcm@openssh.com | 110.4 MB/s | 0.96 | yes | ssh-proxy 4.6; kubectl 4.4 | 27 % | 2026-12-02 06:45 UTC |\n" +
			"| deployments | 1175 / 1736 ms (200, 1, 5 lost) | 98.2 MB/s, aes128-gcm@openssh.com | 62.7 MB/s | 1.57 | yes | ssh-proxy 6.2; kubectl 13.8 | 19 % | 2026-12-02 07:30 UTC |\n"))
		Expect(section(out, "Desire through opi, all batches (PUT /apps/{process_guid}, concurrency 50)")).NotTo(ContainSubstring("| 0 |"))
	})

	It("checks the targets where they apply, marks the older bench's values and leaves out figures a run did not measure", func() {
		out := generatedTables(runs(
			// the older bench: one floor, desire_ratio
			`{"date":"2026-11-29 21:17 UTC","n":5000,"opi_desire":{"per_second":6.8},"desire_ratio":0.94,"rss_idle_mb":31.6,"rss_peak_mb":76.6,"rss_steady_mb":66.3}`,
			`{"date":"2026-11-30 22:12 UTC","n":10000,"backend":"deployments","opi_desire":{"per_second":62.5},"desire_ratio_one_deployment":0.35,"desire_ratio_same_objects":0.895,"rss_idle_mb":35.6,"rss_peak_mb":107.8,"rss_steady_mb":101.4,"go_heap_inuse_bytes":55500000}`,
			`{"date":"2026-12-01 01:28 UTC","n":1000,"backend":"deployments","opi_desire":{"per_second":53.1,"errors":2},"desire_ratio_one_deployment":0.27,"desire_ratio_same_objects":0.95,"rss_idle_mb":36.5,"rss_peak_mb":44.0,"rss_steady_mb":40}`,
		))
		same := section(out, "Desire throughput, opi ÷ the same-objects floor")
		Expect(same).To(ContainSubstring("| 1000 | 0.95 | **no** | 2026-12-01 01:28 UTC | 1 |"), "met only without failed desires")
		Expect(same).To(ContainSubstring("| 5000 | 0.94 † | yes | 2026-11-29 21:17 UTC | 1 |"))
		Expect(same).To(ContainSubstring("| 10000 | 0.895 | **no** |"), "three decimals where two would round across the target")
		one := section(out, "Desire throughput, opi ÷ the one-Deployment floor")
		Expect(one).NotTo(ContainSubstring("| 5000 |"), "the older bench had no one-Deployment floor")
		rss := section(out, "opi RSS: idle / peak / steady after the reads (Go heap in use at rest)")
		Expect(rss).To(ContainSubstring("| 1000 | 36.5 / 44.0 / 40.0 MB (0.0 MB) | yes |"))
		Expect(rss).To(ContainSubstring("| 5000 | 31.6 / 76.6 / 66.3 MB (0.0 MB) † |  |"), "not checked at 5,000")
		Expect(rss).To(ContainSubstring("| 10000 | 35.6 / 107.8 / 101.4 MB (55.5 MB) | **no** |"))
		Expect(out).NotTo(ContainSubstring("### Start-up at N"), "no run measured it")
		Expect(out).NotTo(ContainSubstring("### Tasks:"))
	})

	It("puts task runs in the task tables only, and reads both date formats", func() {
		out := generatedTables(runs(
			`{"date":"2026-11-30T17:11:53Z","tasks":1000,"desire":{"per_second":104,"p50_ms":468,"p99_ms":793},"desire_api_requests_per_task":3,"get_tasks":{"p50_ms":6.33,"p99_ms":74.17},"api_requests_per_get_tasks":0,"cancel":{"per_second":204,"p50_ms":206}}`,
		))
		Expect(section(out, "Tasks: GET /tasks at N, API server requests per call")).To(ContainSubstring(
			"| 1000 | p50 6.33 ms, p99 74.17 ms; 0.000 requests | yes | 2026-11-30 17:11 UTC | 1 |"))
		Expect(out).NotTo(ContainSubstring("### Desire through opi"))
	})

	It("refuses a runs file with a line that is not a run", func() {
		_, err := readRuns(strings.NewReader(`{"date":"2026-11-30 20:00 UTC","n":10}` + "\n{\n"))
		Expect(err).To(MatchError(ContainSubstring("line 2")))
		_, err = readRuns(strings.NewReader(`{"date":"yesterday","n":10}`))
		Expect(err).To(MatchError(ContainSubstring(`date "yesterday"`)))
		_, err = readRuns(strings.NewReader(`{"date":"2026-11-30 20:00 UTC"}`))
		Expect(err).To(MatchError(ContainSubstring("neither n, tasks, agent, agent_bounds nor ssh is set")))
	})

	It("writes only between the markers, and refuses a document without them", func() {
		out, err := renderDoc(doc, runs(`{"date":"2026-11-30 20:00 UTC","n":1000,"opi_desire":{"per_second":70}}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(HavePrefix("# Benchmarks\n\nMethod.\n\n" + generatedBegin + "\n\n1 recorded runs"))
		Expect(out).To(HaveSuffix(generatedEnd + "\n\n## Findings\n\nText.\n"))
		Expect(out).NotTo(ContainSubstring("stale"))
		again, err := renderDoc(out, runs(`{"date":"2026-11-30 20:00 UTC","n":1000,"opi_desire":{"per_second":70}}`))
		Expect(err).NotTo(HaveOccurred())
		Expect(again).To(Equal(out), "regenerating changes nothing")

		_, err = renderDoc("# Benchmarks\n", nil)
		Expect(err).To(MatchError(ContainSubstring("has no")))
	})

	Describe("recording a run", func() {
		var dir, runsPath, docPath string
		BeforeEach(func() {
			dir = GinkgoT().TempDir()
			runsPath, docPath = filepath.Join(dir, "runs.jsonl"), filepath.Join(dir, "benchmarks.md")
			Expect(os.WriteFile(runsPath, []byte(`{"date":"2026-11-30 20:00 UTC","n":1000,"opi_desire":{"per_second":70}}`+"\n"), 0o644)).To(Succeed())
			Expect(os.WriteFile(docPath, []byte(doc), 0o644)).To(Succeed())
		})

		It("appends its JSON line and regenerates the tables; -check then passes", func() {
			Expect(regenerate(runsPath, docPath, true)).To(MatchError(ContainSubstring("make bench-report")), "the stale table")
			Expect(appendRun(runsPath, docPath, []byte(`{"date":"2026-12-01 01:28 UTC","n":1000,"opi_desire":{"per_second":53.1}}`))).To(Succeed())
			b, err := os.ReadFile(runsPath)
			Expect(err).NotTo(HaveOccurred())
			Expect(strings.Split(strings.TrimSpace(string(b)), "\n")).To(HaveLen(2))
			d, err := os.ReadFile(docPath)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(d)).To(ContainSubstring("| 1000 | 53.1 apps/s (p50 0 ms, p99 0 ms) | 2026-12-01 01:28 UTC | 2 |"))
			Expect(regenerate(runsPath, docPath, true)).To(Succeed())
		})

		It("writes nothing for a line that is not one run", func() {
			Expect(appendRun(runsPath, docPath, []byte("{\"date\":\n\"x\"}"))).To(MatchError(ContainSubstring("one line")))
			Expect(appendRun(runsPath, docPath, []byte(`{"n":1000}`))).To(HaveOccurred())
			b, err := os.ReadFile(runsPath)
			Expect(err).NotTo(HaveOccurred())
			Expect(strings.Count(string(b), "\n")).To(Equal(1))
			d, err := os.ReadFile(docPath)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(d)).To(Equal(doc))
		})

		It("refuses -doc without -record", func() {
			_, err := parseFlags([]string{"-doc", docPath})
			Expect(err).To(MatchError("-doc needs -record"))
		})
	})
})

// mustRuns reads JSON lines as a runs file.
func mustRuns(lines ...string) []recordedRun {
	rs, err := readRuns(strings.NewReader(strings.Join(lines, "\n") + "\n"))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return rs
}

// tableOf is a generated figure's section: from its heading to the next.
func tableOf(out, title string) string {
	i := strings.Index(out, "### "+title+"\n")
	ExpectWithOffset(1, i).To(BeNumerically(">=", 0), "no table %q in:\n%s", title, out)
	s := out[i+len("### "+title+"\n"):]
	if j := strings.Index(s, "\n### "); j >= 0 {
		s = s[:j]
	}
	return s
}
