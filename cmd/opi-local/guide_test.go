package main

import (
	"bytes"
	"encoding/json"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/models"
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

	It("moves the same app's route", func() {
		var req models.UpdateDesiredLRPRequest
		Expect(strictDecode(routeUpdateBody, &req)).To(Succeed())
		Expect(req.GUID).To(Equal(exampleGUID))
		Expect(string(req.Update.Routes["cf-router"])).To(ContainSubstring("hello2.example.com"))
	})

	It("shows curl for every route and kubectl for what opi made", func() {
		var out bytes.Buffer
		printGuide(&out, "http://127.0.0.1:8085", "/bins/kubectl", ".local/kubeconfig", "cf-workloads")
		app := "http://127.0.0.1:8085/apps/" + exampleGUID + "/" + exampleVersion
		Expect(out.String()).To(And(
			ContainSubstring("curl -sS -X PUT http://127.0.0.1:8085/apps/"+exampleGUID+"-"+exampleVersion+" "),
			ContainSubstring("curl -sS http://127.0.0.1:8085/apps\n"),
			ContainSubstring("curl -sS "+app+"\n"),
			ContainSubstring("curl -sS -X POST http://127.0.0.1:8085/apps/"+exampleGUID+"-"+exampleVersion+" "),
			ContainSubstring("curl -sS "+app+"/instances\n"),
			ContainSubstring("curl -sS -X PUT "+app+"/stop/0\n"),
			ContainSubstring("curl -sS -X PUT "+app+"/stop\n"),
			ContainSubstring("/bins/kubectl --kubeconfig .local/kubeconfig -n cf-workloads get deployments,pods,services,secrets,ingresses,networkpolicies"),
		))
	})
})
