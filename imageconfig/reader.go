// Package imageconfig reads an image's configuration (command, entrypoint, user, working
// directory, exposed ports) from its registry, with go-containerregistry: what docker staging
// tells Cloud Controller about an image. It reads the manifest and the config blob only, never
// the layers.
package imageconfig

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
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

// Defaults of Reader.
const (
	// DefaultTimeout bounds one whole read of an image's configuration.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxManifestBytes and DefaultMaxConfigBytes bound the bytes read of a manifest
	// (or index) and of the config blob: real ones are a few KiB.
	DefaultMaxManifestBytes = 4 << 20
	DefaultMaxConfigBytes   = 4 << 20
)

// The reasons a read fails with, as Cloud Controller shows them to the developer: a few fixed
// sentences, never the remote's answer, so that a staging tells nothing about what answered
// where. Opi's log keeps the detail (Error's cause).
const (
	ReasonNotAllowed          = "the image's registry is not allowed"
	ReasonUnreachable         = "the image's registry is not reachable"
	ReasonRegistryFailed      = "the image's registry could not serve the image"
	ReasonNotFound            = "the image was not found"
	ReasonTooLarge            = "the image's manifest or configuration is too large"
	ReasonNotAnImage          = "the reference is not an image"
	ReasonCredentialsRefused  = "the image's registry refused the credentials"
	ReasonCredentialsRequired = "the image's registry requires credentials"
)

// Error is a failed read: Error() is one of the Reason sentences, Unwrap the cause (for opi's
// log only).
type Error struct {
	Reason string
	Cause  error
}

func (e *Error) Error() string { return e.Reason }
func (e *Error) Unwrap() error { return e.Cause }

// Reader reads image configurations. It implements opi.ImageReader and is safe for concurrent
// use.
type Reader struct {
	// Timeout bounds one read; DefaultTimeout when 0.
	Timeout time.Duration
	// MaxManifestBytes and MaxConfigBytes bound the bytes read of each manifest and of the
	// config blob; the defaults when 0.
	MaxManifestBytes, MaxConfigBytes int64
	// Policy decides which addresses may be dialled; NewAddressPolicy(nil, nil) when nil
	// (loopback, link-local and private ranges refused).
	Policy *AddressPolicy
}

var _ opi.ImageReader = (*Reader)(nil)

var defaultPolicy = NewAddressPolicy(nil, nil)

// ReadImageConfig reads image's configuration. For a multi-platform image it reads the
// linux/amd64 one. A failure is an *Error whose message is one of the Reason sentences; the
// caller's context ending is its error.
func (r *Reader) ReadImageConfig(ctx context.Context, image string, registry *opi.PrivateRegistry) (*opi.ImageConfig, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return nil, &Error{Reason: ReasonNotAnImage, Cause: err}
	}
	timeout := cmp.Or(r.Timeout, DefaultTimeout)
	readCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	state := &readState{}
	rt := newTransport(cmp.Or(r.Policy, defaultPolicy), cmp.Or(r.MaxManifestBytes, DefaultMaxManifestBytes),
		cmp.Or(r.MaxConfigBytes, DefaultMaxConfigBytes), state)
	defer rt.close()

	auth := authn.Anonymous
	if registry != nil {
		auth = authn.FromConfig(authn.AuthConfig{Username: registry.Username, Password: registry.Password})
	}
	img, err := remote.Image(ref, remote.WithContext(readCtx), remote.WithAuth(auth), remote.WithUserAgent("opi"),
		remote.WithTransport(rt))
	if err == nil {
		var cfg *opi.ImageConfig
		if cfg, err = configOf(img); err == nil {
			return cfg, nil
		}
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("read image %s: %w", image, ctx.Err())
	}
	if err == nil {
		err = errors.New("no error") // unreachable: a read fails with one
	}
	return nil, &Error{Reason: reason(state, registry != nil, readCtx.Err(), err), Cause: fmt.Errorf("read image %s: %w", image, err)}
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

// reason is the sentence for a failed read: a body past its limit, a refused address, the
// registry's answer, what the transport saw (an address refused on the way), a timeout.
func reason(state *readState, withCredentials bool, readErr, err error) string {
	var terr *transport.Error
	var netErr net.Error
	var urlErr *url.Error
	switch {
	case state.tooLarge.Load() || errors.Is(err, errTooLarge):
		return ReasonTooLarge
	case errors.Is(err, errNotAllowed):
		return ReasonNotAllowed
	case errors.As(err, &terr) && isUnauthorized(terr):
		if withCredentials {
			return ReasonCredentialsRefused
		}
		return ReasonCredentialsRequired
	case errors.As(err, &terr) && isNotFound(terr):
		return ReasonNotFound
	case errors.As(err, &terr):
		return ReasonRegistryFailed
	case state.refused.Load():
		// A refused dial whose error go-containerregistry did not keep (it joins the
		// attempts of its ping, for one): no answer came, and an address was refused.
		return ReasonNotAllowed
	case readErr != nil, errors.As(err, &netErr), errors.As(err, &urlErr):
		return ReasonUnreachable
	default:
		// Not an image go-containerregistry can read (a media type it does not know, no
		// linux/amd64 in an index, a config that is not JSON).
		return ReasonNotAnImage
	}
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

// Detail is the cause of e for opi's log: URLs in it lose their user info and query (a
// redirect to a blob store may carry a signed token).
func (e *Error) Detail() string {
	if e.Cause == nil {
		return ""
	}
	return urlInText.ReplaceAllStringFunc(e.Cause.Error(), func(raw string) string {
		u, err := url.Parse(raw)
		if err != nil {
			return "(url)"
		}
		return u.Scheme + "://" + u.Host + u.Path
	})
}

var urlInText = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)
