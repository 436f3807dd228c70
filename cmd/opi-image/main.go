// Command opi-image assembles opi's container image without a container engine or a registry:
// a minimal base it writes itself (a passwd and group naming a non-root user, /tmp), the static
// opi binary as a layer, and an image config running `/opi connect` as that user. It writes a
// tarball that `docker load` / `podman load` read, and an OCI image layout that
// `skopeo copy oci:DIR docker://...` or `crane push` publish. `make image` runs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	var opts Options
	var tarPath, layoutPath, tag string
	flag.StringVar(&opts.Binary, "binary", "", "the static opi binary (CGO_ENABLED=0) to put in the image")
	flag.StringVar(&opts.AgentBinary, "agent-binary", "", "the static opi-agent binary (CGO_ENABLED=0) to put in the image beside opi")
	flag.StringVar(&opts.Version, "version", "devel", "opi's version, for the image's labels")
	flag.StringVar(&opts.Arch, "arch", runtime.GOARCH, "the binary's architecture")
	flag.StringVar(&tarPath, "tar", "", "write a `docker load` tarball here")
	flag.StringVar(&layoutPath, "layout", "", "write an OCI image layout into this folder")
	flag.StringVar(&tag, "tag", "opi-bridge/opi:devel", "the image's name in the tarball and the layout")
	flag.Parse()
	if opts.Binary == "" || (tarPath == "" && layoutPath == "") {
		fmt.Fprintln(os.Stderr, "usage: opi-image --binary PATH [--agent-binary PATH] [--version V] [--tag NAME] --tar FILE and/or --layout DIR")
		os.Exit(2)
	}
	if err := run(opts, tag, tarPath, layoutPath); err != nil {
		fmt.Fprintf(os.Stderr, "opi-image: %v\n", err)
		os.Exit(1)
	}
}

func run(opts Options, tag, tarPath, layoutPath string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("tag %q: %w", tag, err)
	}
	img, err := Build(opts)
	if err != nil {
		return err
	}
	if tarPath != "" {
		if err := tarball.WriteToFile(tarPath, ref, img); err != nil {
			return fmt.Errorf("write %s: %w", tarPath, err)
		}
		fmt.Println("wrote", tarPath, "("+ref.String()+")")
	}
	if layoutPath != "" {
		// A fresh layout each time: appending to an old one would pile up images.
		if err := os.RemoveAll(layoutPath); err != nil {
			return fmt.Errorf("clear %s: %w", layoutPath, err)
		}
		p, err := layout.Write(layoutPath, empty.Index)
		if err != nil {
			return fmt.Errorf("write %s: %w", layoutPath, err)
		}
		if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": ref.TagStr(),
		}), layout.WithPlatform(v1.Platform{OS: "linux", Architecture: opts.Arch})); err != nil {
			return fmt.Errorf("write %s: %w", layoutPath, err)
		}
		fmt.Println("wrote", layoutPath, "(OCI image layout, "+ref.TagStr()+")")
	}
	return nil
}

// epoch is the image's creation time: fixed, so that the same binary gives the same image
// digest.
var epoch = time.Unix(0, 0).UTC()
