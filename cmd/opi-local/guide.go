package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/opi-bridge/opi/localkube"
)

// The example app of the printed guide: CC names an LRP by a process guid and a version, each a
// UUID, and the Diego process guid joins them with "-".
const (
	exampleGUID    = "5d9c6d6d-3a3e-4c5f-9f2e-6b1c0e8a7f10"
	exampleVersion = "0b8e3a49-72f4-4f1e-9d5a-3c2b1a0f9e87"
)

// desireBody is a DesireLRPRequest as Cloud Controller sends it for a docker app: two instances
// of busybox serving HTTP on 8080.
const desireBody = `{
  "guid": "` + exampleGUID + `",
  "version": "` + exampleVersion + `",
  "process_guid": "` + exampleGUID + `-` + exampleVersion + `",
  "process_type": "web",
  "app_guid": "8a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
  "app_name": "hello",
  "space_guid": "2f3e4d5c-6b7a-4988-a7b6-c5d4e3f2a1b0",
  "space_name": "dev",
  "organization_guid": "9e8d7c6b-5a49-4382-b1a0-f9e8d7c6b5a4",
  "organization_name": "demo",
  "environment": {
    "PORT": "8080",
    "VCAP_APP_PORT": "8080",
    "VCAP_APP_HOST": "0.0.0.0",
    "MEMORY_LIMIT": "256m",
    "VCAP_APPLICATION": "{\"application_name\":\"hello\",\"space_name\":\"dev\",\"organization_name\":\"demo\"}",
    "VCAP_SERVICES": "{}"
  },
  "egress_rules": [],
  "placement_tags": [],
  "instances": 2,
  "memory_mb": 256,
  "disk_mb": 1024,
  "cpu_weight": 3,
  "health_check_type": "port",
  "health_check_http_endpoint": null,
  "health_check_timeout_ms": 0,
  "start_timeout_ms": 60000,
  "last_updated": "1700000000.0",
  "volume_mounts": [],
  "ports": [8080],
  "routes": {"cf-router": [{"hostname": "hello.example.com", "port": 8080}]},
  "lifecycle": {"docker_lifecycle": {"image": "busybox", "command": ["/bin/sh", "-c", "httpd -f -p 8080"]}},
  "user_defined_annotations": {}
}`

// updateBody is an UpdateDesiredLRPRequest scaling the example app to three instances.
const updateBody = `{"guid": "` + exampleGUID + `", "version": "` + exampleVersion + `", "update": {"instances": 3, "annotation": "1700000100.0"}}`

// routeUpdateBody moves the example app to another hostname.
const routeUpdateBody = `{"guid": "` + exampleGUID + `", "version": "` + exampleVersion + `", "update": {"annotation": "1700000200.0", "routes": {"cf-router": [{"hostname": "hello2.example.com", "port": 8080}]}}}`

// printGuide tells the user how to drive opi with curl and look at the result with kubectl.
func printGuide(out io.Writer, base, kubectl, kubeconfig, namespace string) {
	pg := exampleGUID + "-" + exampleVersion
	app := base + "/apps/" + exampleGUID + "/" + exampleVersion
	indented := strings.ReplaceAll(desireBody, "\n", "\n  ")
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

  # move its route: its Ingress follows (kubectl ... get ingresses)
  curl -sS -X POST %[1]s/apps/%[3]s -H 'Content-Type: application/json' -d '%[10]s'

  # restart instance 0
  curl -sS -X PUT %[5]s/stop/0

  # stop the app
  curl -sS -X PUT %[5]s/stop

  (pods annotated %[9]s: "true" are simulated as crash-looping: opi passes
  "user_defined_annotations" on to the pods, so desire with that annotation to see CRASHED)

See what opi made:
  %[7]s --kubeconfig %[8]s -n %[2]s get deployments,pods,services,secrets,ingresses,networkpolicies

Ctrl-C stops opi, then the control plane.
`, base, namespace, pg, indented, app, updateBody, kubectl, kubeconfig, localkube.CrashAnnotation, routeUpdateBody)
}
