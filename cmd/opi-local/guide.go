package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/opi-bridge/opi/localkube"
	"github.com/opi-bridge/opi/testsupport/fixture"
)

// The example app of the printed guide: CC names an LRP by a process guid and a version, each a
// UUID, and the Diego process guid joins them with "-".
const (
	exampleGUID    = "5d9c6d6d-3a3e-4c5f-9f2e-6b1c0e8a7f10"
	exampleVersion = "0b8e3a49-72f4-4f1e-9d5a-3c2b1a0f9e87"
)

// desireLRP is a DesireLRPRequest as Cloud Controller sends it for a web process of the docker
// app "hello": instances of busybox serving HTTP on 8080 at hello.example.com.
func desireLRP(guid, version string, instances int) fixture.Body {
	return fixture.DesireLRP(guid, version).Merge(map[string]any{
		"app_guid": fixture.AppGUID, "app_name": "hello", "space_guid": fixture.SpaceGUID, "space_name": "dev",
		"organization_guid": fixture.OrgGUID, "organization_name": "demo",
		"environment": map[string]string{
			"PORT":             "8080",
			"VCAP_APP_PORT":    "8080",
			"VCAP_APP_HOST":    "0.0.0.0",
			"MEMORY_LIMIT":     "256m",
			"VCAP_APPLICATION": `{"application_name":"hello","space_name":"dev","organization_name":"demo"}`,
			"VCAP_SERVICES":    "{}",
		},
		"instances": instances, "memory_mb": 256, "disk_mb": 1024, "cpu_weight": 3, "health_check_timeout_ms": 0,
		"last_updated":             "1700000000.0",
		"routes":                   fixture.Routes(exampleHost, 8080),
		"lifecycle":                fixture.DockerLifecycle("busybox", []string{"/bin/sh", "-c", "httpd -f -p 8080"}),
		"user_defined_annotations": map[string]string{},
	})
}

// exampleHost is the route of the guide's app.
const exampleHost = "hello.example.com"

// desireBody is the guide's app: two instances.
var desireBody = desireLRP(exampleGUID, exampleVersion, 2).Indented()

// updateBody is an UpdateDesiredLRPRequest scaling the example app to three instances.
var updateBody = fixture.Scale(exampleGUID, exampleVersion, 3, "1700000100.0").JSON()

// The new web process of the guide's rolling deploy: CC gives it a guid of its own.
const (
	rollingGUID    = "e4f1c2b3-6a7d-4e8f-9a0b-1c2d3e4f5a6b"
	rollingVersion = "3b7c9d1e-2f4a-4b6c-8d0e-5f6a7b8c9d0e"
)

// call is one request of an example: a comment line before it when comment is set.
type call struct {
	comment, method, path, body string
}

// curl is c as a curl command against base.
func (c call) curl(base string) string {
	cmd := "curl -sS -X " + c.method + " " + base + c.path
	if c.body != "" {
		cmd += " -H 'Content-Type: application/json' -d '" + c.body + "'"
	}
	return cmd
}

// rollingDeploy is what CC sends opi for `cf push --strategy rolling` of the guide's app (A): it
// desires a new web process (B) carrying A's routes, moves instances from A to B one at a time,
// then stops A. Both serve the route in between.
func rollingDeploy() []call {
	a, b := exampleGUID+"-"+exampleVersion, rollingGUID+"-"+rollingVersion
	scale := func(comment, guid, version string, n int, annotation string) call {
		return call{comment: comment, method: "POST", path: "/apps/" + guid + "-" + version, body: fixture.Scale(guid, version, n, annotation).JSON()}
	}
	return []call{
		{comment: "A, the app above with two instances (desiring it again changes nothing)",
			method: "PUT", path: "/apps/" + a, body: desireLRP(exampleGUID, exampleVersion, 2).JSON()},
		{comment: "B, the app's new web process: its own guid, the same app and route, one instance",
			method: "PUT", path: "/apps/" + b, body: desireLRP(rollingGUID, rollingVersion, 1).JSON()},
		scale("B at 1, A down to 1", rollingGUID, rollingVersion, 1, "1700000201.0"),
		scale("", exampleGUID, exampleVersion, 1, "1700000201.0"),
		scale("B up to 2, A down to 0", rollingGUID, rollingVersion, 2, "1700000202.0"),
		scale("", exampleGUID, exampleVersion, 0, "1700000202.0"),
		{comment: "A stopped: B alone serves the route", method: "PUT", path: "/apps/" + exampleGUID + "/" + exampleVersion + "/stop"},
	}
}

// The staging and task examples of the guide.
const (
	exampleStagingGUID = "c0ffee00-1b2c-4d3e-8f4a-5b6c7d8e9f01"
	exampleTaskGUID    = "7a5b3c1d-2e4f-4a6b-9c8d-0e1f2a3b4c5d"
)

// stagingBody is a StagingRequest as Cloud Controller sends it for `cf push --docker-image`,
// with the image and the callback of this run.
func stagingBody(image, callback string) string {
	return fixture.Staging(exampleStagingGUID, image, callback).Indented()
}

// taskBody is a TaskRequest as Cloud Controller sends it for `cf run-task` of a docker app.
func taskBody(callback string) string {
	return fixture.Task(callback, "exit 0").Indented()
}

// guide is what printGuide needs to know of the run.
type guide struct {
	// Base is opi's URL.
	Base                string
	Kubectl, Kubeconfig string
	Namespace           string
	CCURL               string
	CCCA, CCCert, CCKey string
	// Image is the sample image in the local registry.
	Image string
	// NATSURL is the local NATS server's URL in routing mode nats ("" in the other modes).
	NATSURL string
	// Agent is set when the node agents run (--agent).
	Agent *agentGuide
	// SSH is set when the SSH proxy runs.
	SSH *sshGuide
}

// printGuide tells the user how to drive opi with curl, see the callbacks it sends to the
// Cloud Controller stand-in, and look at the result with kubectl.
func printGuide(out io.Writer, g guide) {
	pg := exampleGUID + "-" + exampleVersion
	app := g.Base + "/apps/" + exampleGUID + "/" + exampleVersion
	indent := func(s string) string { return strings.ReplaceAll(s, "\n", "\n  ") }
	stagingCallback := g.CCURL + "/internal/v3/staging/" + exampleStagingGUID + "/build_completed?start=true"
	taskCallback := g.CCURL + "/internal/v4/tasks/" + exampleTaskGUID + "/completed"
	fmt.Fprintf(out, `
opi is ready at %[1]s (apps go to namespace %[2]s)

Try it:
  # desire an app: two instances of busybox
  curl -sS -X PUT %[1]s/apps/%[3]s -H 'Content-Type: application/json' -d '%[4]s'

  # list every app (Cloud Controller's sync)
  curl -sS %[1]s/apps

  # get the app
  curl -sS %[5]s

  # scale it to three instances
  curl -sS -X POST %[1]s/apps/%[3]s -H 'Content-Type: application/json' -d '%[6]s'

  # its instances
  curl -sS %[5]s/instances

  # restart instance 0
  curl -sS -X PUT %[5]s/stop/0

  # stop the app
  curl -sS -X PUT %[5]s/stop

  (pods annotated %[9]s: "true" are simulated as crash-looping: opi passes
  "user_defined_annotations" on to the pods, so desire with that annotation to see CRASHED)

Staging and tasks call back to a Cloud Controller stand-in at %[10]s (mutual TLS).
Each callback it receives is printed here with a "cc-standin:" prefix; all of them so far:
  curl -s --cacert %[11]s --cert %[12]s --key %[13]s %[10]s/callbacks

  # stage the sample image %[14]s (cf push --docker-image): 202, then the result goes to the stand-in
  curl -sS -X POST %[1]s/stage/%[15]s -H 'Content-Type: application/json' -d '%[16]s'

  # run a task (cf run-task), list tasks, get it, cancel it
  curl -sS -X POST %[1]s/tasks/%[17]s -H 'Content-Type: application/json' -d '%[18]s'
  curl -sS %[1]s/tasks
  curl -sS %[1]s/tasks/%[17]s
  curl -sS -X DELETE %[1]s/tasks/%[17]s

%[19]sSee what opi made:
  %[7]s --kubeconfig %[8]s -n %[2]s get deployments,pods,services,secrets,ingresses,networkpolicies

Ctrl-C stops the ssh proxy, opi, the stand-ins, the registry, then the control plane.
`, g.Base, g.Namespace, pg, indent(desireBody), app, updateBody, g.Kubectl, g.Kubeconfig, localkube.CrashAnnotation,
		g.CCURL, g.CCCA, g.CCCert, g.CCKey, g.Image, exampleStagingGUID, indent(stagingBody(g.Image, stagingCallback)),
		exampleTaskGUID, indent(taskBody(taskCallback)), natsGuide(g.Base, g.NATSURL))
	if g.SSH != nil {
		printSSHGuide(out, *g.SSH)
	}
	if g.Agent != nil {
		printAgentGuide(out, *g.Agent)
	}
}

// natsGuide is the guide's part for routing mode nats: how to watch the registrations opi sends
// in place of a foundation's gorouters, and a rolling deploy whose registrations show both
// versions on one route ("" without a NATS server).
func natsGuide(base, url string) string {
	if url == "" {
		return ""
	}
	var rolling strings.Builder
	for _, c := range rollingDeploy() {
		if c.comment != "" {
			fmt.Fprintf(&rolling, "  # %s\n", c.comment)
		}
		fmt.Fprintf(&rolling, "  %s\n", c.curl(base))
	}
	return fmt.Sprintf(`Routing is nats: opi registers each Ready instance's pod IP and port with the NATS server at
%[1]s, as with a foundation's gorouters (no Service, no Ingress). Each message on %[2]s
is printed here with a %[3]q prefix: router.register after the desire, router.unregister
after a stop. With the NATS CLI:
  nats sub '%[2]s' --server %[1]s

A rolling deploy (cf push --strategy rolling), the calls Cloud Controller makes:
%[4]s
  While A and B both run, the %[3]s lines register %[5]s for the instances of both:
  "process_id":"%[6]s" (A) and "process_id":"%[7]s" (B), each
  with its pod's IP; gorouter balances between every endpoint of a URI. A's scale-down and stop
  unregister A's. curl -sS %[8]s/apps lists both processes in between.

`, url, routerSubjects, natsPrefix, strings.TrimSuffix(rolling.String(), "\n"), exampleHost, exampleGUID, rollingGUID, base)
}
