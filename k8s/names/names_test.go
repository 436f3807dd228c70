package names_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("DeploymentName", func() {
	id := opi.LRPIdentifier{GUID: "8a3d6a87-0d35-4ad7-a6d3-2c0ef0d3bb2a", Version: "f4a19c5e-8b8e-4c1c-9d4b-6a3a2b1c0d9e"}
	sum := sha256.Sum256([]byte(id.ProcessGUID()))
	hash := hex.EncodeToString(sum[:])[:10]

	DescribeTable("is a readable prefix from app and space name plus a hash of the process guid",
		func(appName, spaceName, prefix string) {
			name := names.DeploymentName(&opi.LRP{LRPIdentifier: id, AppName: appName, SpaceName: spaceName})
			Expect(name).To(Equal(prefix + "-" + hash))
			Expect(len(name)).To(BeNumerically("<=", 45))
			Expect(validation.IsDNS1035Label(name)).To(BeEmpty())
		},
		Entry("plain", "My App", "dev", "my-app-dev"),
		Entry("empty names", "", "", "app"),
		Entry("only separators", "--", "__", "app"),
		Entry("starting with a digit", "123abc", "dev", "app-123abc-dev"),
		Entry("non-ascii and punctuation collapse", "Über__App!!", "Space.One", "ber-app-space-one"),
		Entry("cut to 45 chars in all", strings.Repeat("a", 100), "x", strings.Repeat("a", 34)),
		Entry("cut leaves no trailing dash", strings.Repeat("a", 33), "b", strings.Repeat("a", 33)),
	)

	It("is deterministic and differs between versions", func() {
		lrp := &opi.LRP{LRPIdentifier: id, AppName: "a", SpaceName: "s"}
		Expect(names.DeploymentName(lrp)).To(Equal(names.DeploymentName(lrp)))
		other := *lrp
		other.Version = "another-version"
		Expect(names.DeploymentName(&other)).NotTo(Equal(names.DeploymentName(lrp)))
	})
})
