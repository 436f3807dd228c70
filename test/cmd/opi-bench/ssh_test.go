package main

import (
	"errors"

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

var _ = Describe("opi-bench ssh's session tally", func() {
	It("counts an empty output with exit status 0 apart from the errors, which keep their own first", func() {
		var lost lostOutputs
		Expect(lost.check("ok\n", nil)).To(Succeed())
		Expect(lost.check("", nil)).To(MatchError(errLostOutput))
		Expect(lost.check("ko\n", nil)).To(MatchError(`the command answered "ko\n"`))
		Expect(lost.check("", errors.New("ssh: handshake failed"))).To(MatchError("ssh: handshake failed"))
		Expect(lost.check("", nil)).To(MatchError(errLostOutput))

		errs, first, n := lost.apart(phase{Count: 5, Errors: 4})
		Expect(errs).To(Equal(2))
		Expect(first).To(Equal(`the command answered "ko\n"`))
		Expect(n).To(HaveValue(Equal(2)))
	})

	It("shows the lost outputs beside the errors only in the runs that counted them", func() {
		lost := 3
		Expect(sshFigures{SetupErrors: 2}.setupCounts()).To(Equal("2"))
		Expect(sshFigures{SetupErrors: 0, SetupLost: &lost}.setupCounts()).To(Equal("0, 3 lost"))
		Expect(sshFigures{SetupErrors: 0, SetupLost: &lost}.setupFailures()).To(Equal("0 errors, 3 outputs lost below the proxy"))
	})
})
