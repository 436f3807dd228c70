package imageconfig_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/imageconfig"
)

// unresolvable is a registry whose name resolves nowhere (.invalid, RFC 2606).
const unresolvable = "registry.opi-test.invalid/sample/app:v1"

var _ = Describe("Reader and proxies", func() {
	// Run again, in a process of its own, with a proxy in its environment (Go reads the proxy
	// variables once per process).
	It("says a registry whose name resolves nowhere is not reachable (run again with a proxy below)", func() {
		reader := &imageconfig.Reader{Timeout: 5 * time.Second}
		_, err := reader.ReadImageConfig(context.Background(), unresolvable, nil)
		Expect(err).To(MatchError(imageconfig.ReasonUnreachable))
	})

	It("uses no proxy from the environment, which would dial registries for opi, unchecked", func() {
		listener, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(listener.Close)
		var connections atomic.Int32
		go func() {
			for {
				conn, err := listener.Accept()
				if err != nil {
					return
				}
				connections.Add(1)
				_ = conn.Close()
			}
		}()
		proxy := "http://" + listener.Addr().String()

		child := exec.Command(os.Args[0], "-test.run", "^TestImageConfig$",
			"-ginkgo.focus", "resolves nowhere is not reachable")
		child.Env = append(os.Environ(), "HTTPS_PROXY="+proxy, "HTTP_PROXY="+proxy, "https_proxy="+proxy, "http_proxy="+proxy, "NO_PROXY=", "no_proxy=")
		out, err := child.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		Expect(string(out)).To(ContainSubstring("1 Passed"))
		Expect(connections.Load()).To(BeZero())
	})
})
