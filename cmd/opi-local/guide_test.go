package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/testsupport/fixture"
)

var _ = Describe("the printed guide", func() {
	// The examples are pasted by hand into a terminal: a key the contract does not know would be
	// silently ignored by opi and mislead whoever copies it.
	strictDecode := func(body string, into any) error {
		dec := json.NewDecoder(strings.NewReader(body))
		dec.DisallowUnknownFields()
		return dec.Decode(into)
	}

	It("desires a docker app with the keys Cloud Controller sends", func() {
		var req models.DesireLRPRequest
		Expect(strictDecode(desireBody, &req)).To(Succeed())
		Expect(req.ProcessGUID).To(Equal(req.GUID + "-" + req.Version))
		Expect(req.Lifecycle.DockerLifecycle).NotTo(BeNil())
		Expect(req.Lifecycle.DockerLifecycle.Image).To(Equal("busybox"))
		Expect(req.Instances).To(Equal(2))
	})

	It("updates the instances of the same app", func() {
		var req models.UpdateDesiredLRPRequest
		Expect(strictDecode(updateBody, &req)).To(Succeed())
		Expect(req.GUID).To(Equal(exampleGUID))
		Expect(req.Version).To(Equal(exampleVersion))
		Expect(*req.Update.Instances).To(Equal(3))
	})

	It("stages the sample image with the keys Cloud Controller sends", func() {
		var req models.StagingRequest
		Expect(strictDecode(stagingBody("127.0.0.1:5000/sample/hello:latest", "https://127.0.0.1:9023/cb"), &req)).To(Succeed())
		Expect(req.StagingGUID).To(Equal(exampleStagingGUID))
		Expect(req.Lifecycle.DockerLifecycle.Image).To(Equal("127.0.0.1:5000/sample/hello:latest"))
		Expect(req.CompletionCallback).To(Equal("https://127.0.0.1:9023/cb"))
		Expect(req.Environment).To(HaveLen(1))
	})

	It("runs a docker task with the keys Cloud Controller sends", func() {
		var req map[string]json.RawMessage
		Expect(json.Unmarshal([]byte(taskBody("https://127.0.0.1:9023/cb")), &req)).To(Succeed())
		Expect(req).To(HaveLen(10))
		for _, key := range []string{"name", "app_guid", "app_name", "org_guid", "org_name", "space_guid", "space_name", "environment", "completion_callback", "lifecycle"} {
			Expect(req).To(HaveKey(key))
		}
		Expect(req["lifecycle"]).To(MatchJSON(`{"docker_lifecycle":{"image":"busybox","command":["/bin/sh","-c","exit 0"]}}`))
		Expect(req["environment"]).To(MatchJSON(`[{"name":"MEMORY_LIMIT","value":"256m"}]`))
	})

	It("shows curl for every route, the callbacks, and kubectl for what opi made", func() {
		var out bytes.Buffer
		printGuide(&out, guide{
			Base: "http://127.0.0.1:8085", Kubectl: "/bins/kubectl", Kubeconfig: ".local/kubeconfig", Namespace: "cf-workloads",
			CCURL: "https://127.0.0.1:9023", CCCA: "/run/cc-ca.crt", CCCert: "/run/cc-client.crt", CCKey: "/run/cc-client.key",
			Image: "127.0.0.1:5000/sample/hello:latest",
		})
		app := "http://127.0.0.1:8085/apps/" + exampleGUID + "/" + exampleVersion
		task := "http://127.0.0.1:8085/tasks/" + exampleTaskGUID
		Expect(out.String()).To(And(
			ContainSubstring("curl -sS -X PUT http://127.0.0.1:8085/apps/"+exampleGUID+"-"+exampleVersion+" "),
			ContainSubstring("curl -sS http://127.0.0.1:8085/apps\n"),
			ContainSubstring("curl -sS "+app+"\n"),
			ContainSubstring("curl -sS -X POST http://127.0.0.1:8085/apps/"+exampleGUID+"-"+exampleVersion+" "),
			ContainSubstring("curl -sS "+app+"/instances\n"),
			ContainSubstring("curl -sS -X PUT "+app+"/stop/0\n"),
			ContainSubstring("curl -sS -X PUT "+app+"/stop\n"),
			ContainSubstring("curl -s --cacert /run/cc-ca.crt --cert /run/cc-client.crt --key /run/cc-client.key https://127.0.0.1:9023/callbacks\n"),
			ContainSubstring(`"cc-standin:"`),
			ContainSubstring("curl -sS -X POST http://127.0.0.1:8085/stage/"+exampleStagingGUID+" "),
			ContainSubstring(`"completion_callback": "https://127.0.0.1:9023/internal/v3/staging/`+exampleStagingGUID+`/build_completed?start=true"`),
			ContainSubstring(`"image": "127.0.0.1:5000/sample/hello:latest"`),
			ContainSubstring("curl -sS -X POST "+task+" "),
			ContainSubstring(`"completion_callback": "https://127.0.0.1:9023/internal/v4/tasks/`+exampleTaskGUID+`/completed"`),
			ContainSubstring("curl -sS http://127.0.0.1:8085/tasks\n"),
			ContainSubstring("curl -sS "+task+"\n"),
			ContainSubstring("curl -sS -X DELETE "+task+"\n"),
			ContainSubstring("/bins/kubectl --kubeconfig .local/kubeconfig -n cf-workloads get deployments,pods,services,secrets,ingresses,networkpolicies"),
		))
	})

	It("says nothing of NATS in the other routing modes", func() {
		var out bytes.Buffer
		printGuide(&out, guide{Base: "http://127.0.0.1:8085"})
		Expect(out.String()).NotTo(ContainSubstring("nats"))
	})

	It("says, in routing mode nats, where the registrations are printed and how to watch them with the NATS CLI", func() {
		var out bytes.Buffer
		printGuide(&out, guide{Base: "http://127.0.0.1:8085", NATSURL: "nats://127.0.0.1:41234"})
		Expect(out.String()).To(And(
			ContainSubstring("NATS server at\nnats://127.0.0.1:41234"),
			ContainSubstring(`printed here with a "nats:" prefix: router.register after the desire`),
			ContainSubstring("  nats sub 'router.*' --server nats://127.0.0.1:41234\n"),
		))
	})

	It("prints, in routing mode nats, CC's rolling deploy: a new web process of the same app on the same route, instances moved one at a time, the old one stopped", func() {
		var out bytes.Buffer
		printGuide(&out, guide{Base: "http://127.0.0.1:8085", NATSURL: "nats://127.0.0.1:41234"})
		a, b := exampleGUID+"-"+exampleVersion, rollingGUID+"-"+rollingVersion

		var lines []string
		for _, c := range rollingDeploy() {
			Expect(out.String()).To(ContainSubstring("  " + c.curl("http://127.0.0.1:8085") + "\n"))
			lines = append(lines, c.method+" "+c.path)
			switch {
			case c.method == "PUT" && c.body != "":
				var req models.DesireLRPRequest
				Expect(strictDecode(c.body, &req)).To(Succeed())
				Expect(req.ProcessGUID).To(Equal(req.GUID + "-" + req.Version))
				Expect(req.AppGUID).To(Equal(fixture.AppGUID), "both processes are the app's")
				Expect(req.Routes).To(HaveKey("cf-router"))
				Expect(string(req.Routes["cf-router"])).To(MatchJSON(`[{"hostname":"hello.example.com","port":8080}]`))
				lines[len(lines)-1] += " " + strconv.Itoa(req.Instances)
			case c.method == "POST":
				var req models.UpdateDesiredLRPRequest
				Expect(strictDecode(c.body, &req)).To(Succeed())
				Expect(c.path).To(Equal("/apps/" + req.GUID + "-" + req.Version))
				lines[len(lines)-1] += " " + strconv.Itoa(*req.Update.Instances)
			}
		}
		Expect(lines).To(Equal([]string{
			"PUT /apps/" + a + " 2",
			"PUT /apps/" + b + " 1",
			"POST /apps/" + b + " 1", "POST /apps/" + a + " 1",
			"POST /apps/" + b + " 2", "POST /apps/" + a + " 0",
			"PUT /apps/" + exampleGUID + "/" + exampleVersion + "/stop",
		}))
		Expect(out.String()).To(ContainSubstring(`"process_id":"` + exampleGUID + `" (A) and "process_id":"` + rollingGUID + `" (B)`))
	})

	It("prints each message on router.* with the prefix, its subject and its body on one line", func() {
		var out bytes.Buffer
		printNATS(&out, "router.register", []byte(`{"host":"10.0.0.1","port":8080}`))
		Expect(out.String()).To(Equal(`nats: router.register {"host":"10.0.0.1","port":8080}` + "\n"))
	})
})
