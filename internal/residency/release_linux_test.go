//go:build linux

package residency_test

import (
	"encoding/json"
	"regexp"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/internal/residency"
)

var _ = Describe("Release", func() {
	It("takes this process's binary out of its resident memory, and the program runs on", func() {
		// Touch a little more of the binary: regexp and JSON code and tables.
		Expect(regexp.MustCompile(`^a+b$`).MatchString("aaab")).To(BeTrue())
		before, err := residency.Resident()
		Expect(err).NotTo(HaveOccurred())
		Expect(before).To(BeNumerically(">", 4<<20), "a Ginkgo test binary has megabytes of its code and data resident once started")

		res, err := residency.Release()
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Mappings).To(BeNumerically(">=", 2), "the text and the read-only data")
		Expect(res.Before).To(BeNumerically(">", 4<<20))
		Expect(res.After).To(BeNumerically("<", res.Before/2))

		// Code and data the process needs come back on first use.
		out, err := json.Marshal(map[string][]int{"b": {1, 2}})
		Expect(err).NotTo(HaveOccurred())
		Expect(string(out)).To(Equal(`{"b":[1,2]}`))
		Expect(regexp.MustCompile(`^(x|y)z$`).MatchString("yz")).To(BeTrue())
		now, err := residency.Resident()
		Expect(err).NotTo(HaveOccurred())
		Expect(now).To(BeNumerically("<", before))
	})
})
