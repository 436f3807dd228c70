package main

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("opi-bench ssh's flags", func() {
	It("runs 50 clients at once by default, OpenSSH's own cipher", func() {
		c, err := parseSSHFlags(nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.clients).To(Equal(50))
		Expect(c.cipher).To(BeEmpty())
	})

	DescribeTable("refuses what cannot be measured",
		func(args []string, message string) {
			_, err := parseSSHFlags(args)
			Expect(err).To(MatchError(ContainSubstring(message)))
		},
		Entry("fewer sessions than clients", []string{"-clients", "50", "-sessions", "10"}, "-sessions at least -clients"),
		Entry("no stream", []string{"-streams", "0"}, "must be positive"),
		Entry("-doc without -record", []string{"-doc", "docs/benchmarks.md"}, "-doc needs -record"),
	)
})
