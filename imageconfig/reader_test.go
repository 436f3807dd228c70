package imageconfig_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/imageconfig"
	"github.com/opi-bridge/opi/opi"
)

// loopbackAllowed is the policy the specs read their loopback registries with.
func loopbackAllowed() *imageconfig.AddressPolicy {
	allowed, err := imageconfig.ParseCIDRs([]string{"127.0.0.0/8"})
	Expect(err).NotTo(HaveOccurred())
	return imageconfig.NewAddressPolicy(allowed, nil)
}

var _ = Describe("Reader", func() {
	var (
		ctx    context.Context
		reader *imageconfig.Reader
	)

	// serve runs go-containerregistry's in-memory registry on loopback, behind basic auth when
	// a user is given.
	serve := func(user, password string) string {
		var h http.Handler = registry.New(registry.Logger(log.New(io.Discard, "", 0)))
		if user != "" {
			inner := h
			h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
					w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				inner.ServeHTTP(w, r)
			})
		}
		server := httptest.NewServer(h)
		DeferCleanup(server.Close)
		return strings.TrimPrefix(server.URL, "http://")
	}

	// push builds an image with one random layer and cfg, and pushes it as ref.
	push := func(ref string, cfg v1.Config, auth authn.Authenticator) {
		layer, err := random.Layer(512, types.DockerLayer)
		Expect(err).NotTo(HaveOccurred())
		img, err := mutate.AppendLayers(empty.Image, layer)
		Expect(err).NotTo(HaveOccurred())
		img, err = mutate.Config(img, cfg)
		Expect(err).NotTo(HaveOccurred())
		parsed, err := name.ParseReference(ref)
		Expect(err).NotTo(HaveOccurred())
		Expect(remote.Write(parsed, img, remote.WithAuth(auth))).To(Succeed())
	}

	sampleConfig := v1.Config{
		Cmd:          []string{"--serve", "--port=8080"},
		Entrypoint:   []string{"/bin/app"},
		WorkingDir:   "/srv",
		User:         "1000:1000",
		ExposedPorts: map[string]struct{}{"9090/tcp": {}, "8080/tcp": {}, "53/udp": {}, "7000": {}},
	}

	BeforeEach(func() {
		ctx = context.Background()
		reader = &imageconfig.Reader{Policy: loopbackAllowed()}
	})

	It("reads cmd, entrypoint, working dir, user and the exposed ports ordered by number", func() {
		image := serve("", "") + "/sample/app:v1"
		push(image, sampleConfig, authn.Anonymous)

		cfg, err := reader.ReadImageConfig(ctx, image, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg).To(Equal(&opi.ImageConfig{
			Cmd:        []string{"--serve", "--port=8080"},
			Entrypoint: []string{"/bin/app"},
			WorkingDir: "/srv",
			User:       "1000:1000",
			Ports: []opi.ImagePort{
				{Port: 53, Protocol: "udp"}, {Port: 7000, Protocol: "tcp"},
				{Port: 8080, Protocol: "tcp"}, {Port: 9090, Protocol: "tcp"},
			},
		}))
	})

	It("reads an image without any of them as an empty configuration", func() {
		image := serve("", "") + "/bare:latest"
		push(image, v1.Config{}, authn.Anonymous)

		cfg, err := reader.ReadImageConfig(ctx, image, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg).To(Equal(&opi.ImageConfig{}))
	})

	It("reads by digest", func() {
		host := serve("", "")
		push(host+"/sample/app:v1", sampleConfig, authn.Anonymous)
		ref, err := name.ParseReference(host + "/sample/app:v1")
		Expect(err).NotTo(HaveOccurred())
		desc, err := remote.Get(ref)
		Expect(err).NotTo(HaveOccurred())

		cfg, err := reader.ReadImageConfig(ctx, host+"/sample/app@"+desc.Digest.String(), nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.Entrypoint).To(Equal([]string{"/bin/app"}))
	})

	Context("with a registry that requires credentials", func() {
		var image string
		BeforeEach(func() {
			image = serve("stager", "s3cret-pw") + "/private/app:v1"
			push(image, sampleConfig, &authn.Basic{Username: "stager", Password: "s3cret-pw"})
		})

		It("reads the image with the right credentials", func() {
			cfg, err := reader.ReadImageConfig(ctx, image, &opi.PrivateRegistry{Username: "stager", Password: "s3cret-pw"})
			Expect(err).NotTo(HaveOccurred())
			Expect(cfg.User).To(Equal("1000:1000"))
		})

		It("says the credentials were refused, without naming them", func() {
			_, err := reader.ReadImageConfig(ctx, image, &opi.PrivateRegistry{Username: "stager", Password: "wrong-pw"})
			Expect(err).To(MatchError(imageconfig.ReasonCredentialsRefused))
		})

		It("says credentials are required when none were given", func() {
			_, err := reader.ReadImageConfig(ctx, image, nil)
			Expect(err).To(MatchError(imageconfig.ReasonCredentialsRequired))
		})
	})

	It("says an unknown image is not found", func() {
		host := serve("", "")
		push(host+"/sample/app:v1", sampleConfig, authn.Anonymous)

		_, err := reader.ReadImageConfig(ctx, host+"/sample/app:v2", nil)
		Expect(err).To(MatchError(imageconfig.ReasonNotFound))
		_, err = reader.ReadImageConfig(ctx, host+"/nobody/here:latest", nil)
		Expect(err).To(MatchError(imageconfig.ReasonNotFound))
	})

	It("says a registry that is down is unreachable", func() {
		server := httptest.NewServer(http.NotFoundHandler())
		host := strings.TrimPrefix(server.URL, "http://")
		server.Close()

		_, err := reader.ReadImageConfig(ctx, host+"/sample/app:v1", nil)
		Expect(err).To(MatchError(imageconfig.ReasonUnreachable))
	})

	It("says a registry that does not answer in time did not answer", func() {
		release := make(chan struct{})
		server := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
		DeferCleanup(server.Close)
		DeferCleanup(func() { close(release) })
		host := strings.TrimPrefix(server.URL, "http://")
		reader.Timeout = 300 * time.Millisecond

		_, err := reader.ReadImageConfig(ctx, host+"/sample/app:v1", nil)
		Expect(err).To(MatchError(imageconfig.ReasonUnreachable))
	})

	It("returns the context's error when the caller's context ends first", func() {
		image := serve("", "") + "/sample/app:v1"
		cancelled, cancel := context.WithCancel(ctx)
		cancel()

		_, err := reader.ReadImageConfig(cancelled, image, nil)
		Expect(err).To(MatchError(context.Canceled))
	})

	It("says a fixed sentence whatever the reference, never the reference itself", func() {
		image := serve("", "") + "/" + strings.Repeat("a", 120) + "/app:v1"
		_, err := reader.ReadImageConfig(ctx, image, nil)
		Expect(err).To(MatchError(imageconfig.ReasonNotFound))
	})

	It("rejects what is not an image reference", func() {
		_, err := reader.ReadImageConfig(ctx, "UPPER/Case::bad", nil)
		Expect(err).To(MatchError(imageconfig.ReasonNotAnImage))
	})
})
