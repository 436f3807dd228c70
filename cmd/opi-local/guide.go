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

// desireBody is a DesireLRPRequest as Cloud Controller sends it for a docker app: two instances
// of busybox serving HTTP on 8080.
var desireBody = fixture.DesireLRP(exampleGUID, exampleVersion).Merge(map[string]any{
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
	"memory_mb": 256, "disk_mb": 1024, "cpu_weight": 3, "health_check_timeout_ms": 0,
	"last_updated":             "1700000000.0",
	"routes":                   fixture.Routes("hello.example.com", 8080),
	"lifecycle":                fixture.DockerLifecycle("busybox", []string{"/bin/sh", "-c", "httpd -f -p 8080"}),
	"user_defined_annotations": map[string]string{},
}).Indented()

// updateBody is an UpdateDesiredLRPRequest scaling the example app to three instances.
var updateBody = fixture.Scale(exampleGUID, exampleVersion, 3, "1700000100.0").JSON()

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

Ctrl-C stops opi, the stand-in, the registry, then the control plane.
`, g.Base, g.Namespace, pg, indent(desireBody), app, updateBody, g.Kubectl, g.Kubeconfig, localkube.CrashAnnotation,
		g.CCURL, g.CCCA, g.CCCert, g.CCKey, g.Image, exampleStagingGUID, indent(stagingBody(g.Image, stagingCallback)),
		exampleTaskGUID, indent(taskBody(taskCallback)), natsGuide(g.NATSURL))
}

// natsGuide is the guide's part for routing mode nats: how to watch the registrations opi sends
// in place of a foundation's gorouters ("" without a NATS server).
func natsGuide(url string) string {
	if url == "" {
		return ""
	}
	return fmt.Sprintf(`Routing is nats: opi registers each Ready instance's pod IP and port with the NATS server at
%[1]s, as with a foundation's gorouters (no Service, no Ingress). Each message on %[2]s
is printed here with a %[3]q prefix: router.register after the desire, router.unregister
after a stop. With the NATS CLI:
  nats sub '%[2]s' --server %[1]s

`, url, routerSubjects, natsPrefix)
}
