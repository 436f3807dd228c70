// Package imageconfig reads an image's configuration (command, entrypoint, user, working
// directory, exposed ports) from its registry, with go-containerregistry: what docker staging
// tells Cloud Controller about an image. It reads the manifest and the config blob only, never
// the layers.
package imageconfig

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/opi-bridge/opi/opi"
)

// DefaultTimeout bounds one read of an image's configuration.
const DefaultTimeout = 30 * time.Second

// maxReasonLen bounds a failure message: Cloud Controller stores it.
const maxReasonLen = 255

// Reader reads image configurations. It implements opi.ImageReader and is safe for concurrent
// use.
type Reader struct {
	// Timeout bounds one read; DefaultTimeout when 0.
	Timeout time.Duration
	// Transport is the HTTP transport to registries; go-containerregistry's default when nil.
	Transport http.RoundTripper
}

var _ opi.ImageReader = (*Reader)(nil)

// ReadImageConfig reads image's configuration. For a multi-platform image it reads the
// linux/amd64 one. Errors say shortly what went wrong, naming the image but never a credential.
func (r *Reader) ReadImageConfig(ctx context.Context, image string, registry *opi.PrivateRegistry) (*opi.ImageConfig, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return nil, errors.New(shorten(fmt.Sprintf("image %q is not a valid image reference", image)))
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	readCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	auth := authn.Anonymous
	if registry != nil {
		auth = authn.FromConfig(authn.AuthConfig{Username: registry.Username, Password: registry.Password})
	}
	opts := []remote.Option{remote.WithContext(readCtx), remote.WithAuth(auth), remote.WithUserAgent("opi")}
	if r.Transport != nil {
		opts = append(opts, remote.WithTransport(r.Transport))
	}
	img, err := remote.Image(ref, opts...)
	if err == nil {
		var cfg *opi.ImageConfig
		if cfg, err = configOf(img); err == nil {
			return cfg, nil
		}
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("read image %s: %w", image, ctx.Err())
	}
	return nil, errors.New(reason(image, registry != nil, timeout, readCtx.Err(), err))
}

// configOf is the image's run configuration; exposed ports ("8080/tcp", "53/udp", "9000") are
// ordered by number then protocol, so that the same image always gives the same result.
func configOf(img v1.Image) (*opi.ImageConfig, error) {
	file, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	c := file.Config
	cfg := &opi.ImageConfig{Cmd: c.Cmd, Entrypoint: c.Entrypoint, WorkingDir: c.WorkingDir, User: c.User}
	for spec := range c.ExposedPorts {
		number, protocol, _ := strings.Cut(spec, "/")
		port, err := strconv.ParseUint(number, 10, 16)
		if err != nil || port == 0 {
			continue // not a port a container can expose; docker would not have built it
		}
		if protocol == "" {
			protocol = "tcp"
		}
		cfg.Ports = append(cfg.Ports, opi.ImagePort{Port: int32(port), Protocol: strings.ToLower(protocol)})
	}
	sort.Slice(cfg.Ports, func(i, j int) bool {
		if cfg.Ports[i].Port != cfg.Ports[j].Port {
			return cfg.Ports[i].Port < cfg.Ports[j].Port
		}
		return cfg.Ports[i].Protocol < cfg.Ports[j].Protocol
	})
	return cfg, nil
}

// reason turns a registry error into a short message for Cloud Controller.
func reason(image string, withCredentials bool, timeout time.Duration, readErr, err error) string {
	var msg string
	var terr *transport.Error
	var netErr net.Error
	var urlErr *url.Error
	switch {
	case readErr != nil:
		msg = fmt.Sprintf("registry of %s did not answer within %s", image, timeout)
	case errors.As(err, &terr) && isUnauthorized(terr):
		if withCredentials {
			msg = "registry refused the credentials for " + image
		} else {
			msg = "registry requires credentials for " + image
		}
	case errors.As(err, &terr) && isNotFound(terr):
		msg = "image " + image + " not found"
	case errors.As(err, &terr):
		msg = fmt.Sprintf("registry answered %d for %s", terr.StatusCode, image)
	case errors.As(err, &netErr), errors.As(err, &urlErr):
		msg = "registry of " + image + " is unreachable"
	default:
		msg = "cannot read image " + image + ": " + err.Error()
	}
	return shorten(msg)
}

func shorten(msg string) string {
	if len(msg) > maxReasonLen {
		return msg[:maxReasonLen-3] + "..."
	}
	return msg
}

func isUnauthorized(e *transport.Error) bool {
	if e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden {
		return true
	}
	for _, d := range e.Errors {
		if d.Code == transport.UnauthorizedErrorCode || d.Code == transport.DeniedErrorCode {
			return true
		}
	}
	return false
}

func isNotFound(e *transport.Error) bool {
	if e.StatusCode == http.StatusNotFound {
		return true
	}
	for _, d := range e.Errors {
		if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
			return true
		}
	}
	return false
}
