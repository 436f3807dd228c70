package main

import (
	"flag"
	"os"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// referencePath is the configuration reference, from this package's folder.
const referencePath = "../../docs/configuration.md"

// flagName is a flag as the reference's tables write it.
var flagName = regexp.MustCompile(`--([a-z0-9][a-z0-9-]*)`)

// agentSection is the reference's section of `opi agent`, which has flags only.
const agentSection = "## `opi agent`"

var _ = Describe("The configuration reference's `opi agent` section", func() {
	It("names every flag of opi agent in its `| flag | default | meaning |` table, and only real flags", func() {
		// When this fails: a flag was added to agentFlags without its row in the section, or a
		// row names a flag opi agent does not have.
		doc, err := os.ReadFile(referencePath)
		Expect(err).NotTo(HaveOccurred())
		_, section, found := strings.Cut(string(doc), agentSection+"\n")
		Expect(found).To(BeTrue(), "%s has no %q section", referencePath, agentSection)
		if next := strings.Index(section, "\n## "); next >= 0 {
			section = section[:next]
		}
		var documented []string
		for _, line := range strings.Split(section, "\n") {
			cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
			if !strings.HasPrefix(strings.TrimSpace(line), "|") || len(cells) < 3 {
				continue
			}
			for _, m := range flagName.FindAllStringSubmatch(cells[0], -1) {
				documented = append(documented, m[1])
			}
		}
		var defined []string
		cfg := AgentConfig{}
		agentFlags(&cfg).VisitAll(func(f *flag.Flag) { defined = append(defined, f.Name) })
		Expect(defined).To(ContainElements("node", "loggregator-addr", "state-dir"))
		Expect(documented).To(ConsistOf(defined))
	})
})
