package main

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

var _ = Describe("opi's image", Ordered, func() {
	const testVersion = "1.2.3-imagetest"
	var dir, tarPath, layoutPath string

	BeforeAll(func() {
		// As `make image` builds it: static, with the version linked in.
		bin, err := gexec.BuildWithEnvironment("github.com/opi-bridge/opi/cmd/opi", []string{"CGO_ENABLED=0"},
			"-trimpath", "-ldflags", "-X main.buildVersion="+testVersion)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(gexec.CleanupBuildArtifacts)
		agentBin, err := gexec.BuildWithEnvironment("github.com/opi-bridge/opi/cmd/opi-agent", []string{"CGO_ENABLED=0"}, "-trimpath")
		Expect(err).NotTo(HaveOccurred())
		dir = GinkgoT().TempDir()
		tarPath, layoutPath = filepath.Join(dir, "opi.tar"), filepath.Join(dir, "oci")
		Expect(run(Options{Binary: bin, AgentBinary: agentBin, Version: testVersion, Arch: runtime.GOARCH}, "opi-bridge/opi:test", tarPath, layoutPath)).To(Succeed())
	})

	check := func(img v1.Image) {
		cfg, err := img.ConfigFile()
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.OS).To(Equal("linux"))
		Expect(cfg.Architecture).To(Equal(runtime.GOARCH))
		Expect(cfg.Config.Entrypoint).To(Equal([]string{"/opi", "connect"}))
		Expect(cfg.Config.Labels).To(HaveKeyWithValue("org.opencontainers.image.version", testVersion))

		// A numeric user that is not root, so that runAsNonRoot can verify it.
		user, group, _ := strings.Cut(cfg.Config.User, ":")
		uid, err := strconv.Atoi(user)
		Expect(err).NotTo(HaveOccurred(), "user %q is not numeric", cfg.Config.User)
		Expect(uid).NotTo(BeZero())
		_, err = strconv.Atoi(group)
		Expect(err).NotTo(HaveOccurred(), "group %q is not numeric", cfg.Config.User)

		// The binary in the image's filesystem is static and answers --version.
		bin := filepath.Join(GinkgoT().TempDir(), "opi")
		var passwd string
		agent := false
		fs := mutate.Extract(img)
		defer fs.Close()
		tr := tar.NewReader(fs)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			Expect(err).NotTo(HaveOccurred())
			switch hdr.Name {
			case "opi":
				Expect(hdr.FileInfo().Mode().Perm() & 0o111).NotTo(BeZero())
				out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
				Expect(err).NotTo(HaveOccurred())
				_, err = io.Copy(out, tr)
				Expect(err).NotTo(HaveOccurred())
				Expect(out.Close()).To(Succeed())
			case "opi-agent":
				agent = hdr.FileInfo().Mode().Perm()&0o111 != 0
			case "etc/passwd":
				b, err := io.ReadAll(tr)
				Expect(err).NotTo(HaveOccurred())
				passwd = string(b)
			}
		}
		Expect(passwd).To(ContainSubstring(":" + user + ":" + group + ":"))
		Expect(agent).To(BeTrue(), "no executable /opi-agent in the image")
		f, err := elf.Open(bin)
		Expect(err).NotTo(HaveOccurred())
		for _, p := range f.Progs {
			Expect(p.Type).NotTo(Equal(elf.PT_INTERP), "the binary is dynamically linked")
		}
		f.Close()
		out, err := exec.Command(bin, "--version").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(Equal("opi " + testVersion + "\n"))
	}

	It("is written as a tarball `docker load` reads", func() {
		img, err := tarball.ImageFromPath(tarPath, nil)
		Expect(err).NotTo(HaveOccurred())
		check(img)
	})

	It("is written as an OCI image layout", func() {
		index, err := layout.ImageIndexFromPath(layoutPath)
		Expect(err).NotTo(HaveOccurred())
		manifest, err := index.IndexManifest()
		Expect(err).NotTo(HaveOccurred())
		Expect(manifest.Manifests).To(HaveLen(1))
		Expect(manifest.Manifests[0].Annotations).To(HaveKeyWithValue("org.opencontainers.image.ref.name", "test"))
		img, err := index.Image(manifest.Manifests[0].Digest)
		Expect(err).NotTo(HaveOccurred())
		check(img)
	})

	It("has the same digest when built again from the same binaries", func() {
		first, err := tarball.ImageFromPath(tarPath, nil)
		Expect(err).NotTo(HaveOccurred())
		again := filepath.Join(dir, "again.tar")
		bins := map[string]string{"opi": filepath.Join(dir, "opi-bin"), "opi-agent": filepath.Join(dir, "opi-agent-bin")}
		// Rebuild from the binaries inside the first image.
		fs := mutate.Extract(first)
		tr := tar.NewReader(fs)
		for found := 0; found < len(bins); {
			hdr, err := tr.Next()
			Expect(err).NotTo(HaveOccurred())
			if bin, ok := bins[hdr.Name]; ok {
				data, err := io.ReadAll(tr)
				Expect(err).NotTo(HaveOccurred())
				Expect(os.WriteFile(bin, data, 0o755)).To(Succeed())
				found++
			}
		}
		fs.Close()
		Expect(run(Options{Binary: bins["opi"], AgentBinary: bins["opi-agent"], Version: testVersion, Arch: runtime.GOARCH}, "opi-bridge/opi:test", again, "")).To(Succeed())
		second, err := tarball.ImageFromPath(again, nil)
		Expect(err).NotTo(HaveOccurred())
		d1, err := first.Digest()
		Expect(err).NotTo(HaveOccurred())
		d2, err := second.Digest()
		Expect(err).NotTo(HaveOccurred())
		Expect(d2).To(Equal(d1))
	})

	It("refuses a missing binary", func() {
		_, err := Build(Options{Binary: filepath.Join(dir, "nope"), Version: "x", Arch: runtime.GOARCH})
		Expect(err).To(MatchError(ContainSubstring("read binary")))
	})
})
