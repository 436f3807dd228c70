package gorouter_test

import (
	"os"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/gorouter"
)

var _ = Describe("Registration", func() {
	It("encodes the body gorouter reads (golden)", func() {
		r := gorouter.Registration{
			Host: "10.244.1.7", Port: 8080,
			URIs:                 []string{"dora.apps.example.com", "dora.apps.example.com/api"},
			App:                  "6e3b1cb0-61d5-4b8e-b1d7-0d23d9b35e3e",
			PrivateInstanceID:    "4f8c3a2e-93a5-4b5b-9b51-0e2c3c1d8a17",
			PrivateInstanceIndex: "2",
			Tags: map[string]string{
				"component": "opi", "app_id": "6e3b1cb0-61d5-4b8e-b1d7-0d23d9b35e3e", "app_name": "dora",
				"space_id": "s-1", "space_name": "dev", "organization_id": "o-1", "organization_name": "org",
				"process_id": "p-1", "process_type": "web", "source_id": "6e3b1cb0-61d5-4b8e-b1d7-0d23d9b35e3e",
			},
			AvailabilityZone: "z1",
		}
		golden, err := os.ReadFile("testdata/registration.json")
		Expect(err).NotTo(HaveOccurred())
		Expect(string(r.Encode())).To(Equal(string(golden[:len(golden)-1])))
	})

	It("leaves out an empty availability zone and no tags", func() {
		r := gorouter.Registration{Host: "10.0.0.1", Port: 80, URIs: []string{"a.example.com"}, App: "g",
			PrivateInstanceID: "i", PrivateInstanceIndex: "0"}
		Expect(string(r.Encode())).To(Equal(`{"host":"10.0.0.1","port":80,"uris":["a.example.com"],"app":"g","private_instance_id":"i","private_instance_index":"0"}`))
	})
})
