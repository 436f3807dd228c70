package bifrost_test

import (
	"encoding/json"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("Diego shapes", func() {
	lrp := &opi.LRP{
		LRPIdentifier:   opi.LRPIdentifier{GUID: guid, Version: version},
		AppGUID:         "app-guid-1",
		Instances:       3,
		MemoryMB:        256,
		DiskMB:          1024,
		LastUpdated:     "1600000000.2499998",
		Image:           "busybox",
		Ports:           []int32{8080},
		Routes:          []opi.Route{{Hostname: "dora.example.com", Port: 8080}},
		ModificationTag: opi.ModificationTag{Epoch: "uid-1", Index: 2},
	}

	It("renders a scheduling info with protobuf field names", func() {
		b, err := json.Marshal(bifrost.SchedulingInfo(lrp))
		Expect(err).NotTo(HaveOccurred())
		Expect(b).To(MatchJSON(`{
		  "desired_lrp_key":{"process_guid":"` + guid + `-` + version + `","domain":"cf-apps","log_guid":"app-guid-1"},
		  "annotation":"1600000000.2499998","instances":3,
		  "desired_lrp_resource":{"memory_mb":256,"disk_mb":1024},
		  "modification_tag":{"epoch":"uid-1","index":2},
		  "guid":"` + guid + `","version":"` + version + `"}`))
	})

	It("renders a desired lrp with its routes under cf-router", func() {
		d := bifrost.DesiredLRP(lrp)
		Expect(d.ProcessGUID).To(Equal(guid + "-" + version))
		Expect(d.Annotation).To(Equal("1600000000.2499998"))
		Expect(d.Routes).To(Equal(map[string][]models.Route{"cf-router": {{Hostname: "dora.example.com", Port: 8080}}}))
		Expect(d.Instances).To(BeEquivalentTo(3))
	})
})
