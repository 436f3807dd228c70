// Package registry runs an OCI image registry in process on loopback (go-containerregistry's
// registry: manifests and blobs in memory), optionally behind basic auth, and pushes small
// images to it. The integration suite and `make run` use it to stage images without a container
// engine or a network.
package registry

import (
	"crypto/subtle"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Options configure Start.
type Options struct {
	// Username and Password, when set, protect every request with basic auth.
	Username, Password string
	// Addr to listen on; default 127.0.0.1:0.
	Addr string
	// Hostile, when set, makes every image reference answer as a hostile registry would
	// instead of serving pushed images.
	Hostile Hostility
}

// Hostility is how a hostile registry answers.
type Hostility string

const (
	// EndlessConfig answers every manifest with one that declares a 1 TiB config blob, and
	// streams that blob without end (no Content-Length).
	EndlessConfig Hostility = "endless-config"
	// EndlessManifest streams a manifest without end.
	EndlessManifest Hostility = "endless-manifest"
)

// HugeConfigSize is the config size an EndlessConfig registry declares.
const HugeConfigSize = 1 << 40

// Registry is a running registry.
type Registry struct {
	// Host is host:port, the registry part of image references (e.g. 127.0.0.1:5000).
	Host string

	opts        Options
	server      *http.Server
	listener    net.Listener
	connections atomic.Int64
}

// Start starts a registry.
func Start(opts Options) (*Registry, error) {
	if opts.Addr == "" {
		opts.Addr = "127.0.0.1:0"
	}
	listener, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	var handler http.Handler = ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	if opts.Hostile != "" {
		handler = hostile(opts.Hostile)
	}
	if opts.Username != "" {
		handler = basicAuth(opts.Username, opts.Password, handler)
	}
	r := &Registry{
		Host:     listener.Addr().String(),
		opts:     opts,
		listener: listener,
	}
	r.server = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(_ net.Conn, state http.ConnState) {
			if state == http.StateNew {
				r.connections.Add(1)
			}
		}}
	go func() { _ = r.server.Serve(listener) }()
	return r, nil
}

// Connections is how many connections the registry accepted (whether or not a request
// followed): a spec that must not reach it checks this.
func (r *Registry) Connections() int64 { return r.connections.Load() }

// AllowedCIDR is the one address opi must allow for registries (opi refuses loopback
// registries unless allowed).
func (r *Registry) AllowedCIDR() string {
	host, _, _ := net.SplitHostPort(r.Host)
	if strings.Contains(host, ":") {
		return host + "/128"
	}
	return host + "/32"
}

// OpiArgs are the arguments `opi connect` needs to stage from the registries given: each one's
// address allowed.
func OpiArgs(registries ...*Registry) []string {
	var cidrs []string
	for _, r := range registries {
		cidrs = append(cidrs, r.AllowedCIDR())
	}
	return []string{"--staging-allowed-cidrs", strings.Join(cidrs, ",")}
}

// hostile answers the registry API as mode says: the /v2/ ping with 200, every manifest and
// blob hostilely.
func hostile(mode Hostility) http.Handler {
	config := `{"architecture":"amd64","os":"linux","config":{"Cmd":["`
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch path := req.URL.Path; {
		case path == "/v2/" || path == "/v2":
			w.WriteHeader(http.StatusOK)
		case strings.Contains(path, "/manifests/") && mode == EndlessManifest:
			w.Header().Set("Content-Type", string(types.DockerManifestSchema2))
			stream(w, `{"schemaVersion":2,"mediaType":"`+string(types.DockerManifestSchema2)+`","layers":[`, `{},`)
		case strings.Contains(path, "/manifests/"):
			manifest := fmt.Sprintf(`{"schemaVersion":2,"mediaType":%q,"config":{"mediaType":%q,"size":%d,"digest":"sha256:%s"},"layers":[]}`,
				types.DockerManifestSchema2, types.DockerConfigJSON, HugeConfigSize, strings.Repeat("ab", 32))
			w.Header().Set("Content-Type", string(types.DockerManifestSchema2))
			w.Header().Set("Content-Length", fmt.Sprint(len(manifest)))
			if req.Method != http.MethodHead {
				_, _ = io.WriteString(w, manifest)
			}
		case strings.Contains(path, "/blobs/"):
			w.Header().Set("Content-Type", "application/octet-stream")
			stream(w, config, "x")
		default:
			http.NotFound(w, req)
		}
	})
}

// stream writes head, then repeat over and over until the client goes away.
func stream(w http.ResponseWriter, head, repeat string) {
	chunk := []byte(strings.Repeat(repeat, (64<<10)/len(repeat)))
	if _, err := io.WriteString(w, head); err != nil {
		return
	}
	for {
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
}

// basicAuth answers 401 with a Basic challenge (as registries do, so that clients retry with
// credentials) unless the request carries the right ones.
func basicAuth(username, password string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		user, pass, ok := req.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(user), []byte(username)) != 1 ||
			subtle.ConstantTimeCompare([]byte(pass), []byte(password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="opi-test-registry"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`))
			return
		}
		next.ServeHTTP(w, req)
	})
}

// Image is the run configuration of an image to push.
type Image struct {
	Cmd, Entrypoint []string
	WorkingDir      string
	User            string
	// ExposedPorts as in an image config: "8080/tcp", "53/udp".
	ExposedPorts []string
}

// Push builds a small linux/amd64 image with cfg (one random layer of 1 KiB) and pushes it as
// repository:tag (e.g. "sample/app:v1"). It returns the image reference to use
// (<host>/<repository>:<tag>).
func (r *Registry) Push(repositoryTag string, cfg Image) (string, error) {
	ref := r.Host + "/" + strings.TrimPrefix(repositoryTag, "/")
	parsed, err := name.ParseReference(ref)
	if err != nil {
		return "", fmt.Errorf("parse %s: %w", ref, err)
	}
	layer, err := random.Layer(1024, types.DockerLayer)
	if err != nil {
		return "", fmt.Errorf("make layer: %w", err)
	}
	img, err := mutate.AppendLayers(emptyLinuxImage(), layer)
	if err != nil {
		return "", fmt.Errorf("add layer: %w", err)
	}
	file, err := img.ConfigFile()
	if err != nil {
		return "", fmt.Errorf("read config: %w", err)
	}
	file = file.DeepCopy()
	file.Config.Cmd = cfg.Cmd
	file.Config.Entrypoint = cfg.Entrypoint
	file.Config.WorkingDir = cfg.WorkingDir
	file.Config.User = cfg.User
	if len(cfg.ExposedPorts) > 0 {
		file.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range cfg.ExposedPorts {
			file.Config.ExposedPorts[p] = struct{}{}
		}
	}
	if img, err = mutate.ConfigFile(img, file); err != nil {
		return "", fmt.Errorf("set config: %w", err)
	}
	auth := authn.Anonymous
	if r.opts.Username != "" {
		auth = &authn.Basic{Username: r.opts.Username, Password: r.opts.Password}
	}
	if err := remote.Write(parsed, img, remote.WithAuth(auth)); err != nil {
		return "", fmt.Errorf("push %s: %w", ref, err)
	}
	return ref, nil
}

// emptyLinuxImage is an image without layers for linux/amd64.
func emptyLinuxImage() v1.Image {
	img, _ := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: "amd64",
		OS:           "linux",
		RootFS:       v1.RootFS{Type: "layers"},
	})
	return img
}

// Close stops the registry.
func (r *Registry) Close() error {
	return r.server.Close()
}
