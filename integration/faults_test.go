package integration_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/localkube"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
	"github.com/opi-bridge/opi/testsupport/fixture"
)

// tryCall is call for requests that may fail (opi killed or stopped meanwhile): it reports
// transport errors instead of failing the test.
func tryCall(o *opiServer, method, path, body string) (int, string, error) {
	req, err := http.NewRequest(method, o.URL+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// listed are the process guids GET /apps reports, with their annotation.
func listed(o *opiServer) map[string]string {
	status, body := o.call("GET", "/apps", "")
	ExpectWithOffset(1, status).To(Equal(http.StatusOK), body)
	var list models.DesiredLRPSchedulingInfosResponse
	ExpectWithOffset(1, json.Unmarshal([]byte(body), &list)).To(Succeed())
	out := map[string]string{}
	for _, info := range list.DesiredLRPSchedulingInfos {
		out[info.DesiredLRPKey.ProcessGUID] = info.Annotation
	}
	return out
}

// deploymentName is the name opi gives the app's Deployment (newApp's app and space names).
func deploymentName(a *app) string {
	return names.DeploymentName(&opi.LRP{
		LRPIdentifier: opi.LRPIdentifier{GUID: a.guid, Version: a.version},
		AppName:       "Dora The App", SpaceName: "dev",
	})
}

// expectOneWorkloadWithItsSecret checks that a has one workload in ns and a's env Secret
// exists, controlled by the workload when owned says so, else owned by nothing (as a first
// desire makes it).
func expectOneWorkloadWithItsSecret(ns string, a *app, owned bool) {
	d := workloads(ns, a)
	ExpectWithOffset(1, d).To(HaveLen(1))
	secret, err := kube.CoreV1().Secrets(ns).Get(context.Background(), deploymentName(a)+"-env", metav1.GetOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	if owned {
		ExpectWithOffset(1, metav1.IsControlledBy(secret, &d[0])).To(BeTrue())
	} else {
		ExpectWithOffset(1, secret.OwnerReferences).To(BeEmpty())
	}
}

// leftoverSecret creates the env Secret of a as opi's first desire step does, and nothing else:
// what opi killed right after that step leaves behind.
func leftoverSecret(client kubernetes.Interface, ns string, a *app) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: deploymentName(a) + "-env", Namespace: ns,
			Labels: map[string]string{
				"opi-bridge.io/guid": a.guid, "opi-bridge.io/version": a.version,
				"opi-bridge.io/app-guid": "app-" + a.guid, "opi-bridge.io/process-type": "web",
				"opi-bridge.io/source-type": "APP", "app.kubernetes.io/managed-by": "opi",
			},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"PORT": []byte("8080")},
	}
	created, err := client.CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return created
}

// namespaceState is what opi made in ns, checked for completeness: per LRP (guid/version)
// its Deployments (or StatefulSets), and every Secret and Service that no live one of its LRP
// controls (a Secret owned by nothing belongs to the live workload it is named after: a
// desire leaves its Secrets so).
type namespaceState struct {
	Deployments map[string][]string // process guid → deployment names
	Replicas    map[string]int32
	Annotations map[string]string
	Orphans     []string
	// Incomplete lists LRPs whose Deployment lacks its env Secret or Service.
	Incomplete []string
}

func stateOf(client kubernetes.Interface, ns string) namespaceState {
	ctx := context.Background()
	opts := metav1.ListOptions{LabelSelector: "opi-bridge.io/source-type=APP"}
	ds := listWorkloads(client, ns, opts)
	secrets, err := client.CoreV1().Secrets(ns).List(ctx, opts)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	services, err := client.CoreV1().Services(ns).List(ctx, opts)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	budgets, err := client.PolicyV1().PodDisruptionBudgets(ns).List(ctx, opts)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())

	st := namespaceState{Deployments: map[string][]string{}, Replicas: map[string]int32{}, Annotations: map[string]string{}}
	live := map[string]*workload{}   // uid → deployment or statefulset
	byName := map[string]*workload{} // its env Secret's name → it
	for i := range ds {
		d := &ds[i]
		if d.DeletionTimestamp != nil {
			continue
		}
		pg := d.Labels["opi-bridge.io/guid"] + "-" + d.Labels["opi-bridge.io/version"]
		st.Deployments[pg] = append(st.Deployments[pg], d.Name)
		st.Replicas[pg] = *d.Spec.Replicas
		st.Annotations[pg] = d.Annotations["opi-bridge.io/last-updated"]
		live[string(d.UID)] = d
		byName[names.EnvSecretName(d.Name)] = d
	}
	controlled := func(kind, name string, m metav1.Object) bool {
		ref := metav1.GetControllerOf(m)
		if ref == nil || live[string(ref.UID)] == nil {
			if m.GetDeletionTimestamp() == nil {
				st.Orphans = append(st.Orphans, kind+"/"+name)
			}
			return false
		}
		return true
	}
	owned := map[string]int{}
	for i := range secrets.Items {
		if sec := &secrets.Items[i]; metav1.GetControllerOf(sec) == nil && byName[sec.Name] != nil {
			owned[string(byName[sec.Name].UID)]++
			continue
		}
		if controlled("secret", secrets.Items[i].Name, &secrets.Items[i]) {
			owned[string(metav1.GetControllerOf(&secrets.Items[i]).UID)]++
		}
	}
	for i := range services.Items {
		if controlled("service", services.Items[i].Name, &services.Items[i]) {
			owned[string(metav1.GetControllerOf(&services.Items[i]).UID)] += 10
		}
	}
	for i := range budgets.Items {
		// A budget is optional (2+ instances), but never an orphan.
		controlled("poddisruptionbudget", budgets.Items[i].Name, &budgets.Items[i])
	}
	for uid, d := range live {
		if owned[uid] != 11 { // one env Secret (its own), one Service
			st.Incomplete = append(st.Incomplete, fmt.Sprintf("%s (owned objects code %d)", d.Name, owned[uid]))
		}
	}
	return st
}

var _ = Describe("Faults", func() {
	Describe("an API server outage", Ordered, func() {
		// Its own control plane: stopping the suite's API server would disturb other specs.
		var (
			outage *localkube.Cluster
			client kubernetes.Interface
			o      *opiServer
			ns     = "opi-outage"
			a      *app
		)

		BeforeAll(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			var err error
			outage, err = localkube.Start(ctx, localkube.Options{Nodes: 1, NodeMemory: nodeMemory, BinDir: cluster.BinDir()})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() {
				pids := outage.PIDs()
				Expect(outage.Stop()).To(Succeed())
				for _, pid := range pids {
					Expect(syscall.Kill(pid, 0)).To(MatchError(syscall.ESRCH), "process %d outlived the cluster", pid)
				}
			})
			client = outage.Clientset()
			o = startOpiWith(outage.Kubeconfig(), ns, "--write-timeout", "3s")
			a = newApp()
			desire(o, a)
			Eventually(allRunning(o, a)).Should(Equal(running(2)))
		})

		readyz := func() int {
			status, _, err := tryCall(o, "GET", "/readyz", "")
			if err != nil {
				return 0
			}
			return status
		}

		// expectUnavailable checks that every kind of write answers 503 saying why, in bounded
		// time: a desire of fresh and updates and stops of existing.
		expectUnavailable := func(fresh, existing *app) {
			writes := []struct{ method, path, body string }{
				{"PUT", "/apps/" + fresh.processGUID(), fresh.body()},
				{"POST", "/apps/" + existing.processGUID(), fixture.UpdateLRP(existing.guid, existing.version, map[string]any{"instances": 3}).JSON()},
				{"PUT", existing.path() + "/stop/0", ""},
				{"PUT", existing.path() + "/stop", ""},
			}
			for _, w := range writes {
				start := time.Now()
				status, body, err := tryCall(o, w.method, w.path, w.body)
				Expect(err).NotTo(HaveOccurred())
				Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second), "%s %s took too long", w.method, w.path)
				Expect(status).To(Equal(http.StatusServiceUnavailable), "%s %s: %s", w.method, w.path, body)
				Expect(body).To(ContainSubstring("orchestrator unavailable"))
			}
		}

		// expectCachedReads checks that reads still answer, from the cache, what a was.
		expectCachedReads := func() {
			Expect(listed(o)).To(HaveKeyWithValue(a.processGUID(), "1600000000.2499998"))
			status, body := o.call("GET", a.path(), "")
			Expect(status).To(Equal(http.StatusOK), body)
			Expect(body).To(ContainSubstring(`"instances":2`))
			Expect(states(instances(o, a))).To(Equal(running(2)))
		}

		// Writes that time out on a hung API server may still be carried out when it wakes up
		// (their outcome is unknown, as for any timeout), so they target apps of their own, which
		// are converged afterwards as CC would.
		var hungFresh, hungExisting *app

		It("answers writes 503 within the write timeout while the API server hangs, and reads from the cache", func() {
			hungFresh, hungExisting = newApp(), newApp()
			desire(o, hungExisting)
			// stop/0 must have a pod to delete: with none it succeeds without an API call.
			Eventually(allRunning(o, hungExisting)).Should(Equal(running(2)))
			api := apiServerPID(outage)
			Expect(syscall.Kill(api, syscall.SIGSTOP)).To(Succeed())
			DeferCleanup(func() { _ = syscall.Kill(api, syscall.SIGCONT) })

			Eventually(readyz, 30*time.Second).Should(Equal(http.StatusServiceUnavailable))
			expectUnavailable(hungFresh, hungExisting)
			expectCachedReads()

			Expect(syscall.Kill(api, syscall.SIGCONT)).To(Succeed())
			Eventually(readyz, 2*time.Minute).Should(Equal(http.StatusOK))
		})

		It("answers writes 503 at once while the API server is down, and reads from the cache", func() {
			Expect(outage.StopAPIServer()).To(Succeed())
			Eventually(readyz, 30*time.Second).Should(Equal(http.StatusServiceUnavailable))
			expectUnavailable(newApp(), a)
			expectCachedReads()
			status, body, err := tryCall(o, "GET", "/readyz", "")
			Expect(err).NotTo(HaveOccurred())
			Expect(status).To(Equal(http.StatusServiceUnavailable))
			Expect(body).To(ContainSubstring("not ready"))
		})

		// retried makes a write as CC does after an outage: while opi answers 503 (its caches
		// reconnecting, or behind a write it made), the write is made again. A write answered
		// want is seen by the read right after it.
		retried := func(method, path, body string, want int) {
			GinkgoHelper()
			Eventually(func() int {
				status, answer, err := tryCall(o, method, path, body)
				if err != nil {
					return 0
				}
				if status != want {
					Expect(status).To(Equal(http.StatusServiceUnavailable), answer)
					Expect(answer).To(ContainSubstring("orchestrator unavailable"))
					GinkgoWriter.Printf("%s %s: %d %s\n", method, path, status, answer)
				}
				return status
			}, 3*time.Minute, 250*time.Millisecond).Should(Equal(want))
		}

		It("recovers without a restart once the API server is back", func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			Expect(outage.StartAPIServer(ctx)).To(Succeed())

			// client-go's informers reconnect on their own, after a backoff that grows to a
			// minute over a long outage, and a watch refused soon after the API server is back
			// (its watch cache starting anew) waits that long again. Until the caches follow,
			// writes answer 503: refused before writing while a cache is not watching, or made
			// but not yet seen by the cache (kept: repeating the write completes it). The first
			// write answered 202 is seen by the read right after it.
			c := newApp()
			retried("PUT", "/apps/"+c.processGUID(), c.body(), http.StatusAccepted)
			Expect(listed(o)).To(HaveKey(c.processGUID()))
			Eventually(readyz, 3*time.Minute).Should(Equal(http.StatusOK))

			// Nothing that answered 503 while the API server was down was written.
			st := stateOf(client, ns)
			Expect(st.Deployments).To(HaveKey(a.processGUID()))
			Expect(st.Replicas[a.processGUID()]).To(BeEquivalentTo(2))

			// The apps whose writes timed out are desired again, as CC does for what it misses
			// and its user does for a push that failed: the hung writes may have been carried
			// out when the API server woke up (a stop; a desire's first round alone), and a
			// desire completes what exists.
			for _, h := range []*app{hungFresh, hungExisting} {
				retried("PUT", "/apps/"+h.processGUID(), h.body(), http.StatusAccepted)
				Expect(listed(o)).To(HaveKey(h.processGUID()))
			}

			b := newApp()
			retried("PUT", "/apps/"+b.processGUID(), b.body(), http.StatusAccepted)
			Expect(listed(o)).To(HaveKey(b.processGUID()))
			Eventually(allRunning(o, b)).Should(Equal(running(2)))
			retried("POST", "/apps/"+a.processGUID(), updateBody(a, 3, "3.0"), http.StatusOK)
			Expect(listed(o)).To(HaveKeyWithValue(a.processGUID(), "3.0"))
			Expect(listed(o)).To(HaveLen(5))
			Eventually(allRunning(o, a)).Should(Equal(running(3)))
			st = stateOf(client, ns)
			Expect(st.Orphans).To(BeEmpty())
			Expect(st.Incomplete).To(BeEmpty())
		})
	})

	Describe("an interrupted desire", func() {
		It("is completed by the next desire of the app: Deployment made, Secret owned", func() {
			ns := newNamespace()
			o := startOpi(ns)
			a := newApp()
			leftoverSecret(kube, ns, a)
			Expect(listed(o)).NotTo(HaveKey(a.processGUID()))

			desire(o, a)
			expectOneWorkloadWithItsSecret(ns, a, true)
			st := stateOf(kube, ns)
			Expect(st.Orphans).To(BeEmpty())
			Expect(st.Incomplete).To(BeEmpty())
			Eventually(allRunning(o, a)).Should(Equal(running(2)))
		})

		// opi killed while a desire's Secret create is in flight can leave the workload without
		// its Secret: here the Secret is deleted, which leaves the same state.
		It("with its Secret's create in flight is completed by the next desire: the Secret made", func() {
			ns := newNamespace()
			o := startOpi(ns)
			a := newApp()
			desire(o, a)
			Expect(kube.CoreV1().Secrets(ns).Delete(context.Background(), deploymentName(a)+"-env", metav1.DeleteOptions{})).To(Succeed())
			Expect(stateOf(kube, ns).Incomplete).NotTo(BeEmpty())

			desire(o, a)
			expectOneWorkloadWithItsSecret(ns, a, false)
			Expect(stateOf(kube, ns).Incomplete).To(BeEmpty())
		})

		It("with its Secret's create in flight, never desired again, is deleted by the janitor so that CC's sync desires it", func() {
			ns := newNamespace()
			grace := 8 * time.Second
			o := startOpi(ns, "--janitor-period", "1s", "--janitor-grace", grace.String())
			a, complete := newApp(), newApp()
			desire(o, a)
			desire(o, complete)
			Expect(kube.CoreV1().Secrets(ns).Delete(context.Background(), deploymentName(a)+"-env", metav1.DeleteOptions{})).To(Succeed())

			Eventually(listed, grace+30*time.Second, time.Second).WithArguments(o).ShouldNot(HaveKey(a.processGUID()))
			Expect(workloads(ns, a)).To(BeEmpty())
			Expect(o.Logs()).To(ContainSubstring("deleted-incomplete-workload"))
			Expect(listed(o)).To(HaveKey(complete.processGUID()), "a complete app is kept")

			desire(o, a) // CC's sync: the app is missing
			st := stateOf(kube, ns)
			Expect(st.Deployments).To(HaveLen(2))
			Expect(st.Incomplete).To(BeEmpty())
			Expect(st.Orphans).To(BeEmpty())
		})
	})

	Describe("the janitor", func() {
		It("deletes leftovers of desires never completed once past the grace, and keeps fresh ones", func() {
			ns := newNamespace()
			grace := 12 * time.Second
			o := startOpi(ns, "--janitor-period", "1s", "--janitor-grace", grace.String())
			old, fresh, desired := newApp(), newApp(), newApp()
			desire(o, desired)
			leftoverSecret(kube, ns, old)
			created := time.Now()
			Eventually(func() bool {
				_, err := kube.CoreV1().Secrets(ns).Get(context.Background(), deploymentName(old)+"-env", metav1.GetOptions{})
				return err == nil
			}, grace+30*time.Second, time.Second).Should(BeFalse())
			Expect(time.Since(created)).To(BeNumerically(">=", grace-2*time.Second), "deleted within the grace")
			Expect(o.Logs()).To(ContainSubstring("deleted-leftover-secret"))
			Expect(o.Logs()).To(ContainSubstring(deploymentName(old) + "-env"))
			Expect(o.Logs()).NotTo(ContainSubstring("marked-secret-value"))

			leftoverSecret(kube, ns, fresh)
			Consistently(func() error {
				_, err := kube.CoreV1().Secrets(ns).Get(context.Background(), deploymentName(fresh)+"-env", metav1.GetOptions{})
				return err
			}, grace/2, time.Second).Should(Succeed())

			// The desired app is untouched.
			st := stateOf(kube, ns)
			Expect(st.Deployments).To(HaveKey(desired.processGUID()))
			Expect(st.Incomplete).To(BeEmpty())
			Expect(st.Orphans).To(ConsistOf("secret/" + deploymentName(fresh) + "-env"))
		})
	})

	Describe("opi killed at random moments", func() {
		It("loses nothing CC desired and leaves no orphans once CC re-desires what is missing", func() {
			ns := newNamespace()
			// The janitor finishes what CC will not re-desire: apps listed, but whose Secret
			// was not owned yet or whose Service was not made when opi died.
			o := startOpi(ns, "--janitor-period", "1s", "--janitor-grace", "5s")
			var sent []*app
			for round := range 4 {
				batch := make([]*app, 12)
				for i := range batch {
					batch[i] = newApp()
					batch[i].instances = 1
				}
				sent = append(sent, batch...)
				var wg sync.WaitGroup
				for _, a := range batch {
					wg.Go(func() { _, _, _ = tryCall(o, "PUT", "/apps/"+a.processGUID(), a.body()) })
				}
				time.Sleep(time.Duration(20+rand.IntN(300)) * time.Millisecond)
				o.kill()
				wg.Wait()
				GinkgoWriter.Printf("round %d: killed opi mid-burst\n", round)
				o.start()
			}

			// CC's sync, every few seconds until it converges: desire what GET /apps lacks. An
			// app whose workload was made but not its Secret (opi killed between the desire's
			// two rounds) is listed until the janitor deletes it past its grace; then it is
			// missing and desired again.
			resent := map[string]bool{}
			Eventually(func(g Gomega) {
				have := listed(o)
				for _, a := range sent {
					if _, ok := have[a.processGUID()]; !ok {
						resent[a.processGUID()] = true
						desire(o, a)
					}
				}
				st := stateOf(kube, ns)
				g.Expect(listed(o)).To(HaveLen(len(sent)))
				g.Expect(st.Deployments).To(HaveLen(len(sent)))
				for _, a := range sent {
					g.Expect(st.Deployments[a.processGUID()]).To(HaveLen(1))
				}
				g.Expect(st.Orphans).To(BeEmpty())
				g.Expect(st.Incomplete).To(BeEmpty())
			}, 90*time.Second, 2*time.Second).Should(Succeed())
			GinkgoWriter.Printf("%d of %d apps re-desired after the kills\n", len(resent), len(sent))
		})
	})

	Describe("SIGTERM", func() {
		It("stops accepting, lets in-flight requests finish with their normal answers, then exits 0", func() {
			ns := newNamespace()
			o := startOpi(ns, "--shutdown-timeout", "20s")
			a := newApp()
			body := a.body()

			// A desire in flight: its headers are in, its body only half.
			conn, err := net.Dial("tcp", strings.TrimPrefix(o.URL, "http://"))
			Expect(err).NotTo(HaveOccurred())
			defer conn.Close()
			_, err = fmt.Fprintf(conn, "PUT /apps/%s HTTP/1.1\r\nHost: opi\r\nContent-Length: %d\r\n\r\n%s", a.processGUID(), len(body), body[:len(body)/2])
			Expect(err).NotTo(HaveOccurred())
			time.Sleep(300 * time.Millisecond)

			o.session.Signal(syscall.SIGTERM)
			Eventually(func() error {
				c, err := net.DialTimeout("tcp", strings.TrimPrefix(o.URL, "http://"), time.Second)
				if err == nil {
					c.Close()
				}
				return err
			}, 10*time.Second).Should(HaveOccurred(), "opi still accepts connections after SIGTERM")
			Consistently(o.session, time.Second).ShouldNot(gexec.Exit(), "opi exited with a request in flight")

			_, err = io.WriteString(conn, body[len(body)/2:])
			Expect(err).NotTo(HaveOccurred())
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			Expect(err).NotTo(HaveOccurred())
			answer, _ := io.ReadAll(resp.Body)
			Expect(resp.StatusCode).To(Equal(http.StatusAccepted), string(answer))
			Expect(string(answer)).To(MatchJSON(`{}`))

			Eventually(o.session, 20*time.Second).Should(gexec.Exit(0))
			Expect(workloads(ns, a)).To(HaveLen(1))
			Expect(stateOf(kube, ns).Incomplete).To(BeEmpty())
		})

		It("exits within the shutdown timeout even when a client never finishes its request", func() {
			ns := newNamespace()
			o := startOpi(ns, "--shutdown-timeout", "2s")
			conn, err := net.Dial("tcp", strings.TrimPrefix(o.URL, "http://"))
			Expect(err).NotTo(HaveOccurred())
			defer conn.Close()
			_, err = fmt.Fprintf(conn, "PUT /apps/x-y HTTP/1.1\r\nHost: opi\r\nContent-Length: 100\r\n\r\n{")
			Expect(err).NotTo(HaveOccurred())
			time.Sleep(300 * time.Millisecond)

			start := time.Now()
			o.session.Signal(syscall.SIGTERM)
			Eventually(o.session, 10*time.Second).Should(gexec.Exit())
			Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
			o.session = nil // it has exited; its code says the shutdown was cut short
		})
	})
})

// apiServerPID is the process id of the cluster's running kube-apiserver.
func apiServerPID(c *localkube.Cluster) int {
	for _, pid := range c.PIDs() {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if strings.HasSuffix(args[0], "kube-apiserver") && syscall.Kill(pid, 0) == nil {
			return pid
		}
	}
	Fail("no kube-apiserver process")
	return 0
}
