package bifrost_test

import (
	"encoding/json"
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("ConvertUpdate", func() {
	update := func(body string) (opi.LRPIdentifier, opi.LRPUpdate, error) {
		var req models.UpdateDesiredLRPRequest
		Expect(json.Unmarshal([]byte(body), &req)).To(Succeed())
		return bifrost.ConvertUpdate(req)
	}

	It("converts every field", func() {
		id, u, err := update(`{"guid":"` + guid + `","version":"` + version + `","update":{"instances":4,"annotation":"2.0","image":"busybox:2",
			"routes":{"cf-router":[{"hostname":"x.example.com","port":8080}],"internal-router":[1]}}}`)
		Expect(err).NotTo(HaveOccurred())
		Expect(id).To(Equal(opi.LRPIdentifier{GUID: guid, Version: version}))
		Expect(*u.Instances).To(BeEquivalentTo(4))
		Expect(*u.Annotation).To(Equal("2.0"))
		Expect(*u.Image).To(Equal("busybox:2"))
		Expect(*u.Routes).To(Equal([]opi.Route{{Hostname: "x.example.com", Port: 8080}}))
	})

	It("leaves absent fields alone", func() {
		_, u, err := update(`{"guid":"` + guid + `","version":"` + version + `","update":{}}`)
		Expect(err).NotTo(HaveOccurred())
		Expect(u).To(Equal(opi.LRPUpdate{}))
	})

	It("treats routes without cf-router as no routes", func() {
		_, u, err := update(`{"guid":"` + guid + `","version":"` + version + `","update":{"routes":{}}}`)
		Expect(err).NotTo(HaveOccurred())
		Expect(*u.Routes).To(BeEmpty())
	})

	DescribeTable("rejects bad updates",
		func(body, field string) {
			_, _, err := update(body)
			Expect(errors.Is(err, opi.ErrInvalid)).To(BeTrue())
			Expect(err.Error()).To(ContainSubstring(field))
		},
		Entry("no update", `{"guid":"`+guid+`","version":"`+version+`"}`, "update is required"),
		Entry("no guid", `{"version":"`+version+`","update":{}}`, "guid is required"),
		Entry("negative instances", `{"guid":"`+guid+`","version":"`+version+`","update":{"instances":-2}}`, "update.instances"),
		Entry("empty image", `{"guid":"`+guid+`","version":"`+version+`","update":{"image":""}}`, "update.image"),
		Entry("malformed route", `{"guid":"`+guid+`","version":"`+version+`","update":{"routes":{"cf-router":{"hostname":"a"}}}}`, "update.routes.cf-router"),
	)
})

func decodeUpdate(body string) models.UpdateDesiredLRPRequest {
	var req models.UpdateDesiredLRPRequest
	ExpectWithOffset(1, json.Unmarshal([]byte(body), &req)).To(Succeed())
	return req
}
