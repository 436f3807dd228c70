package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/localkube"
	"github.com/opi-bridge/opi/testsupport/sshstandin"
	"github.com/opi-bridge/opi/testsupport/tcptarget"
)

// `opi-bench ssh` measures `opi ssh-proxy` on a local control plane (one kwok node, opi with one
// app of one instance, the proxy with the UAA and CC stand-ins answering at once, all on this
// machine):
//   - session setup: C clients at once, each dial → authentication (the one-time code through
//     the stand-ins) → a session running `echo ok` (a pods/exec, which kwok runs on this
//     machine) → its output read; p50/p99 over S sessions, the cf CLI's way (golang.org/x/crypto/ssh);
//   - tunnel throughput: OpenSSH's `ssh -N -L` through the proxy (its default cipher) against
//     `kubectl port-forward` to the same pod port, which a kwok PortForward maps to a local
//     server sending B bytes per connection; one stream at a time, the two sides in turns, each
//     side's median of R streams. Per side the CPU seconds of the processes carrying it (a
//     profile by process of where a miss goes).
type sshBenchConfig struct {
	clients, sessions, streams int
	streamMB                   int
	opiBin, backend            string
	cipher                     string
	record, doc, note          string
	keep                       bool
}

// targetTunnelRatio is the floor for the proxy's tunnel against kubectl port-forward.
const targetTunnelRatio = 0.8

// sshRun is an SSH run's JSON line (its figures under "ssh", apart from the other runs').
type sshRun struct {
	Date    string     `json:"date"`
	SSH     sshFigures `json:"ssh"`
	Machine machine    `json:"machine"`
	Note    string     `json:"note,omitempty"`
}

type sshFigures struct {
	Backend string `json:"backend"`
	// Session setup.
	Clients         int     `json:"clients"`
	Sessions        int     `json:"sessions"`
	SetupP50        float64 `json:"setup_p50_ms"`
	SetupP99        float64 `json:"setup_p99_ms"`
	SetupErrors     int     `json:"setup_errors"`
	SetupFirstError string  `json:"setup_first_error,omitempty"`
	// SetupLost is the sessions whose `echo ok` ended with exit status 0 and no output, counted
	// apart from the errors and out of the latencies (lostOutputs says why); nil in the runs
	// before it was counted, whose errors include them.
	SetupLost *int `json:"setup_lost_outputs,omitempty"`
	// APIServerCuts is how many exec connections the API server cut during the sessions,
	// its "Error proxying data from client to backend" lines.
	APIServerCuts int    `json:"setup_apiserver_cuts"`
	GoCipher      string `json:"go_client_cipher"`
	// Tunnel throughput: MB (10^6 bytes) per second of one stream, each side's median.
	StreamMB    int          `json:"stream_mb"`
	Streams     int          `json:"streams"`
	Cipher      string       `json:"cipher"`
	TunnelMBps  float64      `json:"tunnel_mb_per_s"`
	KubectlMBps float64      `json:"kubectl_mb_per_s"`
	TunnelRatio float64      `json:"tunnel_ratio"`
	TunnelCPU   cpuByProcess `json:"tunnel_cpu_s_per_gb"`
	KubectlCPU  cpuByProcess `json:"kubectl_cpu_s_per_gb"`
	OthersCPU   float64      `json:"others_cpu_share"`
	// MissProfile is, when the ratio misses its target, the proxy's costliest functions during
	// one more stream through it (perf, by symbol, self time).
	MissProfile []string `json:"proxy_profile_on_miss,omitempty"`
}

// cpuByProcess is CPU seconds per GB carried, by process.
type cpuByProcess map[string]float64

func parseSSHFlags(args []string) (sshBenchConfig, error) {
	var c sshBenchConfig
	fs := flag.NewFlagSet("opi-bench ssh", flag.ContinueOnError)
	fs.IntVar(&c.clients, "clients", 50, "clients setting up sessions at once")
	fs.IntVar(&c.sessions, "sessions", 200, "sessions set up in all (the latencies' sample)")
	fs.IntVar(&c.streams, "streams", 3, "streams per side of the throughput (one at a time)")
	fs.IntVar(&c.streamMB, "stream-mb", 256, "MB (10^6 bytes) each stream carries")
	fs.StringVar(&c.cipher, "cipher", "", "OpenSSH's cipher for the tunnel (default: OpenSSH's default, which the target is for)")
	fs.StringVar(&c.opiBin, "opi-bin", "bin/opi", "the opi binary (make build)")
	fs.StringVar(&c.backend, "backend", backendDeployments, "opi's backend")
	fs.StringVar(&c.record, "record", "", "append the run's JSON line to this runs file")
	fs.StringVar(&c.doc, "doc", "", "with -record: regenerate this document's tables")
	fs.StringVar(&c.note, "note", "", "a note to add to the recorded run")
	fs.BoolVar(&c.keep, "keep", false, "keep the work folder (logs of opi, the proxy and the control plane)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.clients < 1 || c.sessions < c.clients || c.streams < 1 || c.streamMB < 1 {
		return c, errors.New("-clients, -streams and -stream-mb must be positive, -sessions at least -clients")
	}
	if c.doc != "" && c.record == "" {
		return c, errors.New("-doc needs -record")
	}
	return c, nil
}

// The stand-ins' client and code.
const (
	benchSSHClient = "ssh-proxy"
	benchSSHSecret = "ssh-proxy-secret"
	benchSSHCode   = "bench-code"
	// benchAppPort is the app's port the tunnels reach.
	benchAppPort = 8080
)

func runSSHBench(ctx context.Context, cfg sshBenchConfig) (err error) {
	opiBin, err := filepath.Abs(cfg.opiBin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(opiBin); err != nil {
		return fmt.Errorf("checking the opi binary (make build makes it): %w", err)
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		return errors.New("OpenSSH's client (ssh) is missing: install openssh-client")
	}
	workDir, err := os.MkdirTemp("", "opi-bench-ssh-")
	if err != nil {
		return err
	}
	defer dropWorkFolder(workDir, cfg.keep, &err)
	res := sshRun{Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), Note: strings.TrimSpace(cfg.note), Machine: thisMachine()}
	fig := &res.SSH
	fig.Backend, fig.Clients, fig.Sessions, fig.Streams, fig.StreamMB = cfg.backend, cfg.clients, cfg.sessions, cfg.streams, cfg.streamMB
	logf("starting the control plane")
	cluster, err := localkube.Start(ctx, localkube.Options{WorkDir: workDir, KeepWorkDir: cfg.keep})
	if err != nil {
		return fmt.Errorf("starting the control plane: %w", err)
	}
	defer func() {
		if stopErr := cluster.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
	}()

	// opi, and the one app whose instance the sessions and tunnels enter.
	addr, err := localkube.FreeAddr()
	if err != nil {
		return err
	}
	e := &env{
		cfg: config{backend: cfg.backend}, cluster: cluster, opiURL: "http://" + addr, workDir: workDir,
		opiArgs: []string{"connect", "--kubeconfig", cluster.Kubeconfig(), "--listen", addr, "--namespace", opiNamespace, "--backend", cfg.backend},
		http:    &http.Client{Timeout: time.Minute},
	}
	if e.opi, err = e.startOpi(opiBin); err != nil {
		return err
	}
	defer stopProcess("opi", e.opi, &err)
	if err := e.waitOpiReady(ctx); err != nil {
		return err
	}
	a := newApp()
	if _, err := e.desirePhase(ctx, []app{a}, 1); err != nil {
		return fmt.Errorf("desiring the app: %w", err)
	}
	if _, err := waitPods(ctx, cluster.Clientset(), opiNamespace, 1, 2*time.Minute); err != nil {
		return err
	}
	pods, err := cluster.Clientset().CoreV1().Pods(opiNamespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		return fmt.Errorf("finding the app's pod (%d found): %w", len(pods.Items), err)
	}
	pod := pods.Items[0].Name

	// The proxy, with its stand-ins, bounded above the run's clients.
	proxy, err := startBenchProxy(ctx, cfg, cluster, opiBin, a, workDir)
	if err != nil {
		return err
	}
	defer stopProcess("the ssh proxy", proxy.proc, &err)

	logf("session setup: %d sessions, %d clients at once", cfg.sessions, cfg.clients)
	apiServerLog := filepath.Join(cluster.WorkDir(), "logs", "kube-apiserver.log")
	cutsBefore := countLines(apiServerLog, apiServerCut)
	var lost lostOutputs
	setup, err := timed(ctx, cfg.sessions, cfg.clients, func(ctx context.Context, _ int) (time.Duration, error) {
		start := time.Now()
		out, err := proxy.command("echo ok")
		if err := lost.check(out, err); err != nil {
			return 0, err
		}
		return time.Since(start), nil
	})
	if err != nil {
		return fmt.Errorf("session setup: %w", err)
	}
	fig.SetupP50, fig.SetupP99 = setup.P50, setup.P99
	fig.SetupErrors, fig.SetupFirstError, fig.SetupLost = lost.apart(setup)
	fig.APIServerCuts = countLines(apiServerLog, apiServerCut) - cutsBefore
	// golang.org/x/crypto/ssh's client prefers AES-128-GCM and the proxy (the same package)
	// supports it: the cf CLI's sessions use it.
	fig.GoCipher = "aes128-gcm@openssh.com"
	logf("session setup: p50 %.0f ms, p99 %.0f ms, %d errors %s; %d outputs lost, %d exec connections cut by the API server",
		fig.SetupP50, fig.SetupP99, fig.SetupErrors, fig.SetupFirstError, *fig.SetupLost, fig.APIServerCuts)

	if err := benchTunnels(ctx, cfg, cluster, proxy, pod, workDir, fig); err != nil {
		return err
	}
	res.Machine.LoadEnd = loadavg()
	line, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return printRun(res.table(), line, cfg.record, cfg.doc)
}

// lostOutputs counts the sessions whose command ran, exit status 0, but whose output never
// reached the client. The loss is below the proxy, in the API server's SPDY exec proxy: once
// the kubelet (kwok here) has sent the output and the status and closed the exec's connection,
// the client's close of stdin arriving after it fails to be written there, and the API server
// then drops the connection to the client with what it had not yet relayed (docs/benchmarks.md,
// "The SSH proxy"). Such a session is no error of the proxy's and has no latency to the output.
type lostOutputs struct {
	n        atomic.Int64
	firstErr atomic.Value
}

// errLostOutput is a session's whose output was lost.
var errLostOutput = errors.New("no output, exit status 0")

// check is a session's error for timed: nil when it answered "ok".
func (l *lostOutputs) check(out string, err error) error {
	switch {
	case err == nil && out == "":
		l.n.Add(1)
		return errLostOutput
	case err == nil && out != "ok\n":
		err = fmt.Errorf("the command answered %q", out)
	case err == nil:
		return nil
	}
	l.firstErr.CompareAndSwap(nil, err.Error())
	return err
}

// apart is the phase's errors and first error without the lost outputs, and those.
func (l *lostOutputs) apart(p phase) (errs int, first string, lost *int) {
	n := int(l.n.Load())
	if v := l.firstErr.Load(); v != nil {
		first = v.(string)
	}
	return p.Errors - n, first, &n
}

// apiServerCut is the API server's log line of a proxied upgraded connection (exec,
// port-forward) it ended because a write towards the kubelet failed.
const apiServerCut = "Error proxying data from client to backend"

// countLines is the number of lines of the file that contain s (0 without the file).
func countLines(path, s string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(data), s)
}

// benchProxy is the proxy the run started and how to reach it as each client does.
type benchProxy struct {
	proc    *localkube.Process
	addr    string
	user    string
	md5     string
	openssh *sshstandin.OpenSSH
}

func startBenchProxy(ctx context.Context, cfg sshBenchConfig, cluster *localkube.Cluster, opiBin string, a app, workDir string) (*benchProxy, error) {
	st := sshstandin.Start(sshstandin.Options{
		ClientID: benchSSHClient, ClientSecret: benchSSHSecret, Code: benchSSHCode, UserID: "bench-user", ProcessGUID: a.processGUID(),
	})
	go func() {
		<-ctx.Done()
		st.Close()
	}()
	keyFile := filepath.Join(workDir, "host-key.pem")
	hostKey, err := sshstandin.WriteHostKey(keyFile)
	if err != nil {
		return nil, err
	}
	addr, err := localkube.FreeAddr()
	if err != nil {
		return nil, err
	}
	opsAddr, err := localkube.FreeAddr()
	if err != nil {
		return nil, err
	}
	bound := strconv.Itoa(2 * cfg.clients)
	args := append([]string{"ssh-proxy", "--kubeconfig", cluster.Kubeconfig(), "--namespace", opiNamespace, "--backend", cfg.backend,
		"--listen", addr, "--ops-listen", opsAddr, "--host-key", keyFile,
		"--max-sessions", bound, "--max-sessions-per-user", bound,
	}, st.ProxyFlags()...)
	proc, err := localkube.StartProcess("ssh-proxy", opiBin, args, os.Environ(), nil, filepath.Join(workDir, "ssh-proxy.log"))
	if err != nil {
		return nil, err
	}
	if err := proc.WaitHTTP(ctx, "http://"+opsAddr+"/readyz", 2*time.Minute); err != nil {
		_ = proc.Stop()
		return nil, fmt.Errorf("the ssh proxy not ready: %w; see %s/ssh-proxy.log", err, workDir)
	}
	p := &benchProxy{proc: proc, addr: addr, user: sshstandin.User(a.guid, 0), md5: ssh.FingerprintLegacyMD5(hostKey)}
	if p.openssh, err = sshstandin.NewOpenSSH(workDir, addr, p.user, benchSSHCode, hostKey); err != nil {
		_ = proc.Stop()
		return nil, err
	}
	return p, nil
}

// command sets up a session as the cf CLI does and returns the command's output.
func (p *benchProxy) command(cmd string) (string, error) {
	client, err := sshstandin.Dial(p.addr, p.user, benchSSHCode, p.md5, nil)
	if err != nil {
		return "", err
	}
	defer client.Close()
	s, err := client.NewSession()
	if err != nil {
		return "", err
	}
	out, err := s.Output(cmd)
	return string(out), err
}

// benchTunnels measures one stream at a time through OpenSSH's -L and through kubectl
// port-forward, in turns.
func benchTunnels(ctx context.Context, cfg sshBenchConfig, cluster *localkube.Cluster, proxy *benchProxy, pod, workDir string, fig *sshFigures) error {
	n := int64(cfg.streamMB) * 1e6
	src, err := tcptarget.Source(n)
	if err != nil {
		return err
	}
	defer src.Close()
	if err := cluster.ForwardPorts(ctx, opiNamespace, pod, localkube.Forward{Port: benchAppPort, Address: src.Addr()}); err != nil {
		return err
	}

	tunnelAddr, err := localkube.FreeAddr()
	if err != nil {
		return err
	}
	sshArgs := []string{"-v", "-N", "-o", "ExitOnForwardFailure=yes", "-L", tunnelAddr + ":localhost:" + strconv.Itoa(benchAppPort)}
	if cfg.cipher != "" {
		sshArgs = append(sshArgs, "-c", cfg.cipher)
	}
	sshCmd := proxy.openssh.Command(sshArgs...)
	sshOut, err := sshCmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := sshCmd.Start(); err != nil {
		return fmt.Errorf("starting ssh -L: %w", err)
	}
	defer stopCommand(sshCmd)
	cipher := make(chan string, 1)
	go scanCipher(sshOut, cipher)

	// kwok learns of the forward through its watch: the first streams may find none.
	logf("waiting for the tunnel through the proxy to carry a stream")
	if err := poll(ctx, time.Minute, func() (bool, error) {
		attempt, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		got, _, _ := readStream(attempt, tunnelAddr)
		return got == n, nil
	}); err != nil {
		return fmt.Errorf("the tunnel through the proxy never carried a whole stream: %w", err)
	}
	select {
	case fig.Cipher = <-cipher:
	case <-time.After(5 * time.Second):
		fig.Cipher = "unknown"
	}

	kubectl, kubectlAddr, err := cluster.KubectlPortForward(opiNamespace, pod, benchAppPort)
	if err != nil {
		return err
	}
	defer stopCommand(kubectl)

	components := cluster.Components()
	sides := []struct {
		name  string
		addr  string
		procs map[string]int
		mbps  []float64
		cpu   cpuByProcess
	}{
		{name: "ssh -L through the proxy", addr: tunnelAddr, procs: map[string]int{
			"ssh-proxy": proxy.proc.Pid(), "ssh": sshCmd.Process.Pid, "kube-apiserver": components["kube-apiserver"], "kwok": components["kwok"],
		}, cpu: cpuByProcess{}},
		{name: "kubectl port-forward", addr: kubectlAddr, procs: map[string]int{
			"kubectl": kubectl.Process.Pid, "kube-apiserver": components["kube-apiserver"], "kwok": components["kwok"],
		}, cpu: cpuByProcess{}},
	}
	all := []int{osPid, proxy.proc.Pid(), sshCmd.Process.Pid, kubectl.Process.Pid}
	for _, pid := range components {
		all = append(all, pid)
	}
	cpu0 := readCPU(all)
	for i := range cfg.streams {
		for j := range sides {
			s := &sides[(i+j)%len(sides)]
			before := map[string]cpuSample{}
			for name, pid := range s.procs {
				before[name] = readCPU([]int{pid})
			}
			got, took, err := readStream(ctx, s.addr)
			if err != nil || got != n {
				return fmt.Errorf("a stream through %s: %d of %d bytes: %v", s.name, got, n, err)
			}
			for name, pid := range s.procs {
				s.cpu[name] += (readCPU([]int{pid}).ours - before[name].ours) / 100
			}
			mbps := float64(n) / 1e6 / took.Seconds()
			s.mbps = append(s.mbps, mbps)
			logf("%s: %.1f MB/s", s.name, mbps)
		}
	}
	fig.OthersCPU = othersShare(cpu0, readCPU(all))
	gb := float64(n) * float64(cfg.streams) / 1e9
	for _, s := range sides {
		for name := range s.cpu {
			s.cpu[name] /= gb
		}
	}
	fig.TunnelMBps, fig.KubectlMBps = median(sides[0].mbps), median(sides[1].mbps)
	fig.TunnelRatio = ratio(fig.TunnelMBps, fig.KubectlMBps)
	fig.TunnelCPU, fig.KubectlCPU = sides[0].cpu, sides[1].cpu
	logf("tunnel %.1f MB/s (%s), kubectl port-forward %.1f MB/s: ratio %.2f", fig.TunnelMBps, fig.Cipher, fig.KubectlMBps, fig.TunnelRatio)
	if fig.TunnelRatio >= targetTunnelRatio {
		return nil
	}
	logf("the ratio misses its target: profiling the proxy during one more stream")
	profile, err := profileProxy(ctx, workDir, proxy.proc.Pid(), tunnelAddr)
	if err != nil {
		logf("no profile: %v", err)
		return nil
	}
	fig.MissProfile = profile
	return nil
}

// profileProxy records with perf where the proxy's CPU goes during one stream through addr (the
// proxy serves no pprof) and returns its costliest symbols by self time, "12.3% symbol".
func profileProxy(ctx context.Context, workDir string, pid int, addr string) ([]string, error) {
	perf, err := exec.LookPath("perf")
	if err != nil {
		return nil, errors.New("perf is missing (linux-perf)")
	}
	data := filepath.Join(workDir, "ssh-proxy.perf.data")
	rec := exec.Command(perf, "record", "-F", "499", "-p", strconv.Itoa(pid), "-o", data)
	if err := rec.Start(); err != nil {
		return nil, fmt.Errorf("starting perf record: %w", err)
	}
	// perf attaches while it starts: a stream begun at once would be partly missed.
	if err := sleep(ctx, time.Second); err != nil {
		stopCommand(rec)
		return nil, err
	}
	_, _, streamErr := readStream(ctx, addr)
	_ = rec.Process.Signal(os.Interrupt)
	_ = rec.Wait()
	if streamErr != nil {
		return nil, fmt.Errorf("the profiled stream: %w", streamErr)
	}
	out, err := exec.CommandContext(ctx, perf, "report", "-i", data, "--stdio", "--no-children", "--sort", "symbol", "--percent-limit", "1").Output()
	if err != nil {
		return nil, fmt.Errorf("perf report: %w", err)
	}
	var top []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || !strings.HasSuffix(f[0], "%") || strings.HasPrefix(line, "#") {
			continue
		}
		// perf adds a "-" per column that does not apply to a symbol.
		sym := slices.DeleteFunc(f[2:], func(x string) bool { return x == "-" })
		top = append(top, f[0]+" "+strings.Join(sym, " "))
		if len(top) == 12 {
			break
		}
	}
	return top, nil
}

// readStream reads one connection to addr to its end: the bytes and how long they took. It ends
// its own side first: kwok's port-forward passes the server's end on only after the client's.
func readStream(ctx context.Context, addr string) (int64, time.Duration, error) {
	start := time.Now()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	defer context.AfterFunc(ctx, func() { _ = c.Close() })()
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		return 0, 0, err
	}
	n, err := io.Copy(io.Discard, c)
	return n, time.Since(start), err
}

// scanCipher sends the cipher OpenSSH's debug output says it negotiated (server to client).
func scanCipher(r io.Reader, found chan<- string) {
	re := regexp.MustCompile(`kex: server->client cipher: (\S+)`)
	sc := bufio.NewScanner(r)
	sent := false
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil && !sent {
			found <- m[1]
			sent = true
		}
	}
}

func stopCommand(cmd *exec.Cmd) {
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

func stopProcess(what string, p *localkube.Process, err *error) {
	if stopErr := p.Stop(); stopErr != nil {
		*err = errors.Join(*err, fmt.Errorf("stopping %s: %w", what, stopErr))
	}
}

func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (r sshRun) table() string {
	f := r.SSH
	b := newMeasureTable()
	fmt.Fprintf(b, "| session setup, %d clients at once, %d sessions (dial, code, `echo ok` through pods/exec) | p50 %.0f ms, p99 %.0f ms, %s (%s) |\n",
		f.Clients, f.Sessions, f.SetupP50, f.SetupP99, f.setupFailures(), f.GoCipher)
	if f.SetupLost != nil {
		fmt.Fprintf(b, "| exec connections the API server cut during the sessions (its %q lines) | %d |\n", apiServerCut, f.APIServerCuts)
	}
	fmt.Fprintf(b, "| one stream of %d MB, `ssh -N -L` through the proxy (%s) | %.1f MB/s (CPU s per GB: %s) |\n",
		f.StreamMB, f.Cipher, f.TunnelMBps, f.TunnelCPU)
	fmt.Fprintf(b, "| the same, `kubectl port-forward` | %.1f MB/s (CPU s per GB: %s) |\n", f.KubectlMBps, f.KubectlCPU)
	fmt.Fprintf(b, "| tunnel ÷ kubectl port-forward (target ≥ %.1f) | %s %s |\n", targetTunnelRatio, ratioString(f.TunnelRatio, targetTunnelRatio), met(f.TunnelRatio >= targetTunnelRatio))
	if len(f.MissProfile) > 0 {
		fmt.Fprintf(b, "| the proxy's costliest functions during one more stream (perf, self time) | %s |\n", strings.Join(f.MissProfile, "; "))
	}
	return b.String()
}

// setupFailures is the session setup's errors, and its lost outputs where the run counted them
// apart.
func (f sshFigures) setupFailures() string {
	if f.SetupLost == nil {
		return fmt.Sprintf("%d errors", f.SetupErrors)
	}
	return fmt.Sprintf("%d errors, %d outputs lost below the proxy", f.SetupErrors, *f.SetupLost)
}

// setupCounts is setupFailures in the runs' table.
func (f sshFigures) setupCounts() string {
	if f.SetupLost == nil {
		return strconv.Itoa(f.SetupErrors)
	}
	return fmt.Sprintf("%d, %d lost", f.SetupErrors, *f.SetupLost)
}

// String lists the processes' CPU seconds, the costliest first.
func (c cpuByProcess) String() string {
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if c[a] != c[b] {
			if c[a] > c[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %.1f", n, c[n])
	}
	return strings.Join(parts, ", ")
}

// sshTables are the generated table of the SSH runs ("" without any).
func sshTables(runs []recordedRun) string {
	rows := slices.DeleteFunc(slices.Clone(runs), func(r recordedRun) bool { return r.SSH == nil })
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n### SSH proxy (`make bench-ssh`): session setup, 50 clients at once; one tunnel stream against kubectl port-forward\n\n")
	fmt.Fprintf(&b, "| backend | setup p50 / p99 (sessions, errors, outputs lost below the proxy) | tunnel, cipher | kubectl port-forward | ratio (target ≥ %.1f) | met | CPU s per GB: tunnel; kubectl | others' CPU share | date |\n", targetTunnelRatio)
	b.WriteString("| --- | --- | --- | --- | ---: | --- | --- | ---: | --- |\n")
	for _, r := range rows {
		f := r.SSH
		fmt.Fprintf(&b, "| %s | %.0f / %.0f ms (%d, %s) | %.1f MB/s, %s | %.1f MB/s | %s | %s | %s; %s | %.0f %% | %s |\n",
			f.Backend, f.SetupP50, f.SetupP99, f.Sessions, f.setupCounts(), f.TunnelMBps, f.Cipher, f.KubectlMBps,
			ratioString(f.TunnelRatio, targetTunnelRatio), met(f.TunnelRatio >= targetTunnelRatio),
			f.TunnelCPU, f.KubectlCPU, 100*f.OthersCPU, r.at.Format(runDateLayouts[0]))
	}
	return b.String()
}
