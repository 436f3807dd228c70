package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"

	"github.com/opi-bridge/opi/testsupport/sshlocal"
)

// sshOptions are the settings `make run` starts the SSH proxy with.
type sshOptions struct {
	opiBin, namespace, backend string
	// listen is the proxy's SSH address; rbac the ssh-proxy component's rbac.yaml.
	listen, rbac string
	// dir holds its host key, known_hosts, askpass script and log.
	dir string
	// lines are the flags sending its SSH lines to the Loggregator stand-in (--agent).
	lines []string
}

// sshGrants are what the Cloud Controller stand-in grants: the guide's app and the rolling
// deploy's new process, each as the "<guid>-<version>" CC answers with.
var sshGrants = map[string]string{
	exampleGUID: exampleGUID + "-" + exampleVersion,
	rollingGUID: rollingGUID + "-" + rollingVersion,
}

// startSSHProxy runs opi ssh-proxy with the UAA and CC stand-ins as the component's
// ServiceAccount (opi has made the namespace by now).
func startSSHProxy(ctx context.Context, c sshlocal.Cluster, o sshOptions, out io.Writer) (*sshlocal.Proxy, error) {
	rbac, err := os.ReadFile(o.rbac)
	if err != nil {
		return nil, fmt.Errorf("reading the ssh proxy's role (run from the repository's root): %w", err)
	}
	p, err := sshlocal.Start(ctx, c, sshlocal.Options{
		OpiBin: o.opiBin, Namespace: o.namespace, Backend: o.backend, RBAC: string(rbac),
		Listen: o.listen, Dir: o.dir, Grants: sshGrants, ExtraArgs: o.lines,
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "started %s %s (log %s)\n", o.opiBin, strings.Join(p.Args, " "), p.Log)
	return p, nil
}

// appPort is the port the guide's app listens on (its PORT).
const appPort = 8080

// appPortAnswer is what a tunnel to an instance's appPort reads under make run.
const appPortAnswer = "hello from the instance's port 8080 (opi-local answers for it: no container runs under kwok)\n"

// startAppPort serves appPortAnswer on loopback and returns kwok's configuration forwarding
// appPort of every pod in namespace there: kwok runs no container, so without it a tunnel to an
// instance's port would find nothing listening.
func startAppPort(namespace string) (*httptest.Server, string) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, appPortAnswer)
	}))
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	return srv, `apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterPortForward
metadata:
  name: opi-local-app-port
spec:
  selector:
    matchNamespaces:
    - ` + strconv.Quote(namespace) + `
  forwards:
  - ports:
    - ` + strconv.Itoa(appPort) + `
    target:
      address: 127.0.0.1
      port: ` + strconv.Itoa(port) + `
`
}

// sshGuide is what the printed guide says of the proxy.
type sshGuide struct {
	proxy *sshlocal.Proxy
	// lines: the SSH lines go to the Loggregator stand-in.
	lines bool
}

// printSSHGuide tells how to reach the example app's instance with OpenSSH, as cf ssh does.
func printSSHGuide(out io.Writer, g sshGuide) {
	p := g.proxy
	lines := "Without --agent the proxy sends no SSH lines (who came in, when they left); with it they\nare printed with the envelopes."
	if g.lines {
		lines = "Its SSH lines (who came in, when they left) are printed with the envelopes:\n  loggregator-standin: <app guid> [0] SSH OUT Successful remote access by 127.0.0.1:<port>"
	}
	fmt.Fprintf(out, `
cf ssh: opi ssh-proxy listens at %[1]s (log %[2]s) as the ServiceAccount
%[3]s with the ssh-proxy component's Role, against a UAA stand-in (its client %[4]s,
the one-time code %[5]s) and a Cloud Controller stand-in granting ssh_access to the
example app's instances (and the rolling deploy's new process). Its host key, for CC's
app_ssh.host_key_fingerprint: %[6]s (MD5:%[7]s), also on
  curl -sS http://%[8]s/fingerprints
OpenSSH checks it against %[9]s; %[10]s
answers the password question with the code (or leave SSH_ASKPASS* out and type it).

  # desire the example app (above), then run a command in its instance 0 (kwok runs it on
  # this machine, unprivileged, in a scratch folder: no container runs)
  %[11]s

  # a shell under a pty
  %[12]s

  # a tunnel from local port 8081 to the instance's port 8080 (pods/portforward), -N: no
  # shell; then, in another terminal, curl -sS localhost:8081 (opi-local answers for the port)
  %[13]s

%[14]s
`, p.Addr, p.Log, sshlocal.ServiceAccount, sshlocal.ClientID, sshlocal.Code, p.SHA256, p.MD5, p.OpsAddr, p.KnownHosts, p.Askpass,
		p.Command(exampleGUID, 0, nil, "echo hi from $(pwd)"), p.Command(exampleGUID, 0, []string{"-t"}, ""),
		p.Command(exampleGUID, 0, []string{"-N", "-L", "8081:localhost:8080"}, ""), lines)
}
