package imageconfig_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/imageconfig"
	"github.com/opi-bridge/opi/opi"
	"github.com/opi-bridge/opi/testsupport/registry"
)

// pushSample pushes a small image to the registry at host and returns its reference.
func pushSample(host string) string {
	ref := host + "/sample/app:v1"
	parsed, err := name.ParseReference(ref)
	Expect(err).NotTo(HaveOccurred())
	layer, err := random.Layer(512, types.DockerLayer)
	Expect(err).NotTo(HaveOccurred())
	img, err := mutate.AppendLayers(empty.Image, layer)
	Expect(err).NotTo(HaveOccurred())
	Expect(remote.Write(parsed, img)).To(Succeed())
	return ref
}

// heapPeak samples the heap's live objects while read runs and returns the highest figure
// above what it was before (bytes).
func heapPeak(read func()) uint64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := sample[0].Value.Uint64()
	var peak atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > base && v-base > peak.Load() {
				peak.Store(v - base)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	read()
	close(done)
	<-stopped
	return peak.Load()
}

var _ = Describe("Reader with hostile registries", func() {
	var (
		ctx    context.Context
		reader *imageconfig.Reader
	)
	BeforeEach(func() {
		ctx = context.Background()
		reader = &imageconfig.Reader{Policy: loopbackAllowed()}
	})
	start := func(mode registry.Hostility) *registry.Registry {
		r, err := registry.Start(registry.Options{Hostile: mode})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(r.Close)
		return r
	}

	It("stops reading a config that declares 1 TiB and never ends, past its limit, and says it is too large", func() {
		r := start(registry.EndlessConfig)
		var err error
		peak := heapPeak(func() { _, err = reader.ReadImageConfig(ctx, r.Host+"/huge/config:v1", nil) })
		Expect(err).To(MatchError(imageconfig.ReasonTooLarge))
		// The limit is 4 MiB: reading it costs a few times that, not the hundreds of MiB an
		// unbounded read reaches.
		Expect(peak).To(BeNumerically("<", 64<<20))
	})

	It("stops reading a manifest that never ends, past its limit", func() {
		r := start(registry.EndlessManifest)
		var err error
		peak := heapPeak(func() { _, err = reader.ReadImageConfig(ctx, r.Host+"/huge/manifest:v1", nil) })
		Expect(err).To(MatchError(imageconfig.ReasonTooLarge))
		Expect(peak).To(BeNumerically("<", 64<<20))
	})

	It("enforces the configured limits on the bytes read", func() {
		plain, err := registry.Start(registry.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(plain.Close)
		image, err := plain.Push("sample/app:v1", registry.Image{Cmd: []string{strings.Repeat("x", 8<<10)}})
		Expect(err).NotTo(HaveOccurred())

		reader.MaxConfigBytes = 4 << 10
		_, err = reader.ReadImageConfig(ctx, image, nil)
		Expect(err).To(MatchError(imageconfig.ReasonTooLarge))

		reader.MaxConfigBytes = 0
		cfg, err := reader.ReadImageConfig(ctx, image, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Cmd).To(HaveLen(1))
	})
})

var _ = Describe("Reader's registry address policy", func() {
	var (
		ctx  context.Context
		hits atomic.Int32
		host string
	)
	// serve counts each request the registry gets.
	serve := func(addr string, next http.Handler) string {
		listener, err := net.Listen("tcp", addr)
		Expect(err).NotTo(HaveOccurred())
		server := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits.Add(1)
			next.ServeHTTP(w, r)
		}))
		server.Listener = listener
		server.Start()
		DeferCleanup(server.Close)
		return strings.TrimPrefix(server.URL, "http://")
	}
	BeforeEach(func() {
		ctx = context.Background()
		hits.Store(0)
		host = serve("127.0.0.1:0", ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	})

	It("refuses a loopback registry unless allowed, without contacting it", func() {
		_, err := (&imageconfig.Reader{}).ReadImageConfig(ctx, host+"/sample/app:v1", nil)
		Expect(err).To(MatchError(imageconfig.ReasonNotAllowed))
		Expect(hits.Load()).To(BeZero())
	})

	It("refuses an operator's range even inside an allowed one", func() {
		allowed, _ := imageconfig.ParseCIDRs([]string{"127.0.0.0/8"})
		refused, _ := imageconfig.ParseCIDRs([]string{"127.0.0.1"})
		_, err := (&imageconfig.Reader{Policy: imageconfig.NewAddressPolicy(allowed, refused)}).ReadImageConfig(ctx, host+"/sample/app:v1", nil)
		Expect(err).To(MatchError(imageconfig.ReasonNotAllowed))
		Expect(hits.Load()).To(BeZero())
	})

	It("refuses a name that resolves to a refused address", func() {
		_, port, _ := net.SplitHostPort(host)
		_, err := (&imageconfig.Reader{}).ReadImageConfig(ctx, "localhost:"+port+"/sample/app:v1", nil)
		Expect(err).To(MatchError(imageconfig.ReasonNotAllowed))
		Expect(hits.Load()).To(BeZero())
	})

	It("checks the address a redirect leads to", func() {
		// go-containerregistry refuses a redirect to a private IP literal itself; a name is
		// left to the dial: the registry on ::1 sends blobs to localhost (127.0.0.1).
		var blobHits atomic.Int32
		blobHost := serve("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { blobHits.Add(1) }))
		_, blobPort, _ := net.SplitHostPort(blobHost)
		blobHits.Store(0)
		inner := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
		front := serve("[::1]:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
				http.Redirect(w, r, "http://localhost:"+blobPort+r.URL.Path, http.StatusTemporaryRedirect)
				return
			}
			inner.ServeHTTP(w, r)
		}))
		image := pushSample(front)

		allowed, _ := imageconfig.ParseCIDRs([]string{"::1/128"})
		_, err := (&imageconfig.Reader{Policy: imageconfig.NewAddressPolicy(allowed, nil)}).ReadImageConfig(ctx, image, nil)
		Expect(err).To(MatchError(imageconfig.ReasonNotAllowed))
		Expect(blobHits.Load()).To(BeZero())

		// Allowed, the same redirect is followed (and the blob host, which has no blob, fails).
		allowed, _ = imageconfig.ParseCIDRs([]string{"::1/128", "127.0.0.0/8"})
		_, err = (&imageconfig.Reader{Policy: imageconfig.NewAddressPolicy(allowed, nil)}).ReadImageConfig(ctx, image, nil)
		Expect(err).NotTo(MatchError(imageconfig.ReasonNotAllowed))
		Expect(blobHits.Load()).NotTo(BeZero())
	})

	It("tells CC a fixed sentence, never the registry's answer, and keeps the detail for the log", func() {
		leaky := serve("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v2/" {
				return
			}
			http.Error(w, `{"errors":[{"code":"INTERNAL","message":"db at 10.0.0.7:5432 refused"}]}`, http.StatusInternalServerError)
		}))
		reader := &imageconfig.Reader{Policy: loopbackAllowed(), Timeout: 5 * time.Second}
		_, err := reader.ReadImageConfig(ctx, leaky+"/sample/app:v1", &opi.PrivateRegistry{Username: "u", Password: "s3cret-pw"})
		Expect(err).To(MatchError(imageconfig.ReasonRegistryFailed))
		Expect(err.Error()).NotTo(ContainSubstring("10.0.0.7"))
		var ierr *imageconfig.Error
		Expect(errors.As(err, &ierr)).To(BeTrue())
		Expect(ierr.Detail()).To(ContainSubstring("10.0.0.7"))
		Expect(ierr.Detail()).NotTo(ContainSubstring("s3cret-pw"))
	})

	It("keeps a URL's query and user info out of the detail", func() {
		e := &imageconfig.Error{Reason: imageconfig.ReasonUnreachable,
			Cause: errors.New(`Get "https://user:pw@blobs.example.com/data?X-Amz-Signature=t0ken": dial tcp: timeout`)}
		Expect(e.Detail()).To(Equal(`Get "https://blobs.example.com/data": dial tcp: timeout`))
	})
})

var _ = Describe("AddressPolicy", func() {
	parse := func(list ...string) []netip.Prefix {
		p, err := imageconfig.ParseCIDRs(list)
		Expect(err).NotTo(HaveOccurred())
		return p
	}
	addr := netip.MustParseAddr

	It("refuses loopback, link-local, private, CGNAT and their IPv6 and mapped forms by default", func() {
		p := imageconfig.NewAddressPolicy(nil, nil)
		for _, a := range []string{"127.0.0.1", "169.254.169.254", "10.1.2.3", "172.16.0.1", "192.168.1.1",
			"100.64.0.1", "0.0.0.0", "::1", "fe80::1", "fd00::1", "::ffff:10.0.0.1", "64:ff9b::a00:1", "::"} {
			Expect(p.Allows(addr(a))).To(BeFalse(), a)
		}
		for _, a := range []string{"8.8.8.8", "203.0.113.9", "2001:4860:4860::8888", "64:ff9b::808:808"} {
			Expect(p.Allows(addr(a))).To(BeTrue(), a)
		}
	})

	DescribeTable("refuses a refused IPv4 address in every IPv6 form that reaches it, and the special-purpose ranges",
		func(a string) {
			Expect(imageconfig.NewAddressPolicy(nil, nil).Allows(addr(a))).To(BeFalse())
		},
		Entry("IPv4-mapped", "::ffff:10.0.0.1"),
		Entry("IPv4-compatible", "::10.0.0.1"),
		Entry("IPv4-compatible metadata endpoint", "::169.254.169.254"),
		Entry("6to4 of a private address", "2002:0a00:0001::"),
		Entry("6to4 of a private address, any host part", "2002:0a00:0001:1234::5"),
		Entry("6to4 of loopback", "2002:7f00:0001::1"),
		Entry("NAT64", "64:ff9b::10.0.0.1"),
		Entry("NAT64 of the metadata endpoint", "64:ff9b::a9fe:a9fe"),
		Entry("benchmarking 198.18.0.0/15, low end", "198.18.0.1"),
		Entry("benchmarking 198.18.0.0/15, high end", "198.19.255.254"),
		Entry("IETF protocol assignments 192.0.0.0/24", "192.0.0.8"),
		Entry("6to4 of 198.18.0.0/15", "2002:c612:0001::"),
		Entry("NAT64 of 192.0.0.0/24", "64:ff9b::192.0.0.8"),
	)

	DescribeTable("allows a public IPv4 address in the same IPv6 forms",
		func(a string) {
			Expect(imageconfig.NewAddressPolicy(nil, nil).Allows(addr(a))).To(BeTrue())
		},
		Entry("IPv4-mapped", "::ffff:8.8.8.8"),
		Entry("IPv4-compatible", "::8.8.8.8"),
		Entry("6to4", "2002:0808:0808::1"),
		Entry("NAT64", "64:ff9b::8.8.8.8"),
		Entry("next to 198.18.0.0/15", "198.20.0.1"),
		Entry("next to 192.0.0.0/24", "192.0.1.1"),
	)

	DescribeTable("admits an operator's allowed range in every form that reaches it, and only it",
		func(allowed, a string, allows bool) {
			Expect(imageconfig.NewAddressPolicy(parse(allowed), nil).Allows(addr(a))).To(Equal(allows))
		},
		Entry("IPv4 range, plain address", "10.1.0.0/16", "10.1.2.3", true),
		Entry("IPv4 range, mapped address", "10.1.0.0/16", "::ffff:10.1.2.3", true),
		Entry("IPv4 range, 6to4 address", "10.1.0.0/16", "2002:0a01:0203::", true),
		Entry("IPv4 range, NAT64 address", "10.1.0.0/16", "64:ff9b::10.1.2.3", true),
		Entry("IPv4 range, IPv4-compatible address", "10.1.0.0/16", "::10.1.2.3", true),
		Entry("mapped range, plain address", "::ffff:10.1.0.0/112", "10.1.2.3", true),
		Entry("mapped range, mapped address", "::ffff:10.1.0.0/112", "::ffff:10.1.2.3", true),
		Entry("mapped address, plain address", "::ffff:10.1.2.3", "10.1.2.3", true),
		Entry("IPv4 range, outside it", "10.1.0.0/16", "10.2.0.1", false),
		Entry("mapped range, outside it", "::ffff:10.1.0.0/112", "::ffff:10.2.0.1", false),
		Entry("IPv4 range, 6to4 outside it", "10.1.0.0/16", "2002:0a02:0001::", false),
	)

	It("lets the most specific range decide", func() {
		p := imageconfig.NewAddressPolicy(parse("10.0.0.0/8", "203.0.113.7"), parse("10.244.0.0/16", "203.0.113.0/24"))
		Expect(p.Allows(addr("10.1.1.1"))).To(BeTrue())
		Expect(p.Allows(addr("10.244.1.1"))).To(BeFalse())
		Expect(p.Allows(addr("203.0.113.7"))).To(BeTrue())
		Expect(p.Allows(addr("203.0.113.8"))).To(BeFalse())
	})

	It("rejects what is not a CIDR", func() {
		_, err := imageconfig.ParseCIDRs([]string{"10.0.0.0/33"})
		Expect(err).To(MatchError(`"10.0.0.0/33" is not a CIDR`))
		_, err = imageconfig.ParseCIDRs([]string{"example.com"})
		Expect(err).To(MatchError(`"example.com" is not a CIDR or an IP address`))
	})
})
