package tlsfiles_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"

	"github.com/opi-bridge/opi/tlsfiles"
)

var _ = Describe("Reloader", func() {
	var (
		dir, a, b string
		logger    *lagertest.TestLogger
		loads     int
	)

	// load joins both files, and refuses a pair whose contents do not match (a half-done
	// rotation, as a certificate beside the old key would be).
	load := func() (string, error) {
		loads++
		x, err := os.ReadFile(a)
		if err != nil {
			return "", err
		}
		y, err := os.ReadFile(b)
		if err != nil {
			return "", err
		}
		if strings.TrimSuffix(string(x), "-cert") != strings.TrimSuffix(string(y), "-key") {
			return "", errors.New("certificate and key do not match")
		}
		return string(x) + "+" + string(y), nil
	}

	// write replaces a file as a rotation would, with a modification time fixed by age (files of
	// one age have exactly the same time).
	write := func(path, content string, age time.Duration) {
		Expect(os.WriteFile(path, []byte(content), 0o600)).To(Succeed())
		t := time.Unix(1_700_000_000, 0).Add(-age)
		Expect(os.Chtimes(path, t, t)).To(Succeed())
	}

	BeforeEach(func() {
		dir = GinkgoT().TempDir()
		a, b = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
		write(a, "v1-cert", time.Hour)
		write(b, "v1-key", time.Hour)
		logger = lagertest.NewTestLogger("tls")
		loads = 0
	})

	It("loads once at start and again only when a file changed", func() {
		r, err := tlsfiles.New([]string{a, b}, load, logger)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Get()).To(Equal("v1-cert+v1-key"))
		Expect(r.Get()).To(Equal("v1-cert+v1-key"))
		Expect(loads).To(Equal(1))

		write(a, "v2-cert", time.Minute)
		write(b, "v2-key", time.Minute)
		Expect(r.Get()).To(Equal("v2-cert+v2-key"))
		Expect(loads).To(Equal(2))
		Expect(logger).To(gbytes.Say("tls-reloaded"))
	})

	It("keeps the last value that loaded through a half-done rotation, and logs it", func() {
		r, err := tlsfiles.New([]string{a, b}, load, logger)
		Expect(err).NotTo(HaveOccurred())
		write(a, "v2-cert", time.Minute)
		Expect(r.Get()).To(Equal("v1-cert+v1-key"))
		Expect(logger).To(gbytes.Say("tls-reload-failed"))
		write(b, "v2-key", time.Minute)
		Expect(r.Get()).To(Equal("v2-cert+v2-key"))
	})

	It("sees a swapped symlink's new target, as a Secret volume rotates", func() {
		first, second := filepath.Join(dir, "..first"), filepath.Join(dir, "..second")
		Expect(os.Mkdir(first, 0o700)).To(Succeed())
		Expect(os.Mkdir(second, 0o700)).To(Succeed())
		for _, d := range []struct{ dir, version string }{{first, "v1"}, {second, "v2"}} {
			write(filepath.Join(d.dir, "c"), d.version+"-cert", time.Hour)
			write(filepath.Join(d.dir, "k"), d.version+"-key", time.Hour) // same times in both folders
		}
		data := filepath.Join(dir, "..data")
		Expect(os.Symlink(first, data)).To(Succeed())
		a, b = filepath.Join(data, "c"), filepath.Join(data, "k")

		r, err := tlsfiles.New([]string{a, b}, load, logger)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.Get()).To(Equal("v1-cert+v1-key"))
		Expect(os.Remove(data)).To(Succeed())
		Expect(os.Symlink(second, data)).To(Succeed())
		Expect(r.Get()).To(Equal("v2-cert+v2-key"))
	})

	It("fails at start when the files cannot be read or loaded", func() {
		_, err := tlsfiles.New([]string{a, filepath.Join(dir, "missing")}, load, logger)
		Expect(err).To(MatchError(ContainSubstring("tls file")))
		write(a, "v2-cert", time.Minute)
		_, err = tlsfiles.New([]string{a, b}, load, logger)
		Expect(err).To(MatchError(ContainSubstring("do not match")))
	})
})
