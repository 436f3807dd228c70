package sshproxy_test

import (
	"crypto/ed25519"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"

	"github.com/opi-bridge/opi/sshproxy"
)

// colonHex is how the cf CLI writes SHA-1 and MD5 fingerprints.
func colonHex(sum []byte) string {
	parts := make([]string, len(sum))
	for i, b := range sum {
		parts[i] = fmt.Sprintf("%02x", b)
	}
	return strings.Join(parts, ":")
}

var _ = Describe("Host key", func() {
	It("reads a PKCS #8 PEM key and gives its fingerprints in the cf CLI's three forms", func() {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		Expect(err).NotTo(HaveOccurred())
		der, err := x509.MarshalPKCS8PrivateKey(priv)
		Expect(err).NotTo(HaveOccurred())
		path := filepath.Join(GinkgoT().TempDir(), "host-key.pem")
		Expect(os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)).To(Succeed())

		signer, err := sshproxy.LoadHostKey(path)
		Expect(err).NotTo(HaveOccurred())
		wire := signer.PublicKey().Marshal()
		sha256Sum, sha1Sum, md5Sum := sha256.Sum256(wire), sha1.Sum(wire), md5.Sum(wire)
		Expect(sshproxy.FingerprintsOf(signer.PublicKey())).To(Equal(sshproxy.Fingerprints{
			SHA256: base64.RawStdEncoding.EncodeToString(sha256Sum[:]),
			SHA1:   colonHex(sha1Sum[:]),
			MD5:    colonHex(md5Sum[:]),
		}))
		Expect(ssh.FingerprintSHA256(signer.PublicKey())).To(Equal("SHA256:" + sshproxy.FingerprintsOf(signer.PublicKey()).SHA256))
	})

	It("refuses a file that holds no key", func() {
		path := filepath.Join(GinkgoT().TempDir(), "host-key.pem")
		Expect(os.WriteFile(path, []byte("not a key"), 0o600)).To(Succeed())
		_, err := sshproxy.LoadHostKey(path)
		Expect(err).To(MatchError(ContainSubstring("parsing the host key")))
	})
})
