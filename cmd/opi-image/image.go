package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// UID and GID are the image's user: not root, numeric so that Kubernetes' runAsNonRoot can
// check it without reading /etc/passwd (65532 is the "nonroot" of distroless images).
const (
	UID = 65532
	GID = 65532
)

// Options describe the image to build.
type Options struct {
	// Binary is the path of a static opi binary.
	Binary string
	// AgentBinary, if set, is the path of a static opi-agent binary (the node agent: the
	// DaemonSet runs /opi-agent, `opi agent` execs it).
	AgentBinary string
	// Version goes into the image's labels.
	Version string
	// Arch is the binary's GOARCH.
	Arch string
}

// Build assembles the image: a base layer with the user's passwd and group entries and /tmp,
// then the binary at /opi (and the agent's at /opi-agent), run as `/opi connect` by UID.
func Build(opts Options) (v1.Image, error) {
	bin, err := os.ReadFile(opts.Binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	uid, gid := strconv.Itoa(UID), strconv.Itoa(GID)
	base, err := layer([]file{
		{name: "etc/", dir: true, mode: 0o755},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:" + uid + ":" + gid + ":nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:" + gid + ":\n")},
		{name: "home/", dir: true, mode: 0o755},
		{name: "home/nonroot/", dir: true, mode: 0o700, uid: UID, gid: GID},
		// Go's os.TempDir default; opi writes nothing there, but libraries may.
		{name: "tmp/", dir: true, mode: 0o1777},
	})
	if err != nil {
		return nil, err
	}
	bins := []file{{name: "opi", mode: 0o755, data: bin}}
	if opts.AgentBinary != "" {
		agent, err := os.ReadFile(opts.AgentBinary)
		if err != nil {
			return nil, fmt.Errorf("read agent binary: %w", err)
		}
		bins = append(bins, file{name: "opi-agent", mode: 0o755, data: agent})
	}
	app, err := layer(bins)
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), base, app)
	if err != nil {
		return nil, fmt.Errorf("append layers: %w", err)
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", opts.Arch
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Entrypoint = []string{"/opi", "connect"}
	cfg.Config.Cmd = nil
	cfg.Config.User = uid + ":" + gid
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"PATH=/"}
	cfg.Config.ExposedPorts = map[string]struct{}{"8085/tcp": {}, "8086/tcp": {}}
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":       "opi",
		"org.opencontainers.image.description": "OPI bridge: runs Cloud Foundry apps on Kubernetes for Cloud Controller",
		"org.opencontainers.image.version":     opts.Version,
		"org.opencontainers.image.source":      "https://github.com/opi-bridge/opi",
	}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return img, nil
}

type file struct {
	name     string
	dir      bool
	mode     int64
	uid, gid int
	data     []byte
}

// layer is a gzipped tar layer of files, owned by root unless they say otherwise, dated at
// epoch so that the layer's digest depends on its contents only.
func layer(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: epoch, Format: tar.FormatPAX}
		if f.dir {
			hdr.Typeflag = tar.TypeDir
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("tar %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("tar %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return l, nil
}
