package integration_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// testCA signs certificates for one test run; nothing is read from disk but what it writes.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(name string) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	Expect(err).NotTo(HaveOccurred())
	cert, err := x509.ParseCertificate(der)
	Expect(err).NotTo(HaveOccurred())
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a PEM certificate and key for a server (with 127.0.0.1) or a client.
func (ca *testCA) issue(name string, server bool) (certPEM, keyPEM []byte) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	Expect(err).NotTo(HaveOccurred())
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	Expect(err).NotTo(HaveOccurred())
	keyDER, err := x509.MarshalECPrivateKey(key)
	Expect(err).NotTo(HaveOccurred())
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

func writeFile(dir, name string, data []byte) string {
	path := filepath.Join(dir, name)
	Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
	return path
}

var _ = Describe("Mutual TLS", Ordered, func() {
	var (
		o         *opiServer
		ca, other *testCA
		roots     *x509.CertPool
	)

	clientWith := func(cert *tls.Certificate, maxVersion uint16) *http.Client {
		cfg := &tls.Config{RootCAs: roots, MaxVersion: maxVersion}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
	}
	clientCertNamed := func(signer *testCA, name string) *tls.Certificate {
		certPEM, keyPEM := signer.issue(name, false)
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		Expect(err).NotTo(HaveOccurred())
		return &cert
	}
	clientCert := func(signer *testCA) *tls.Certificate { return clientCertNamed(signer, "cloud-controller") }

	BeforeAll(func() {
		dir := GinkgoT().TempDir()
		ca, other = newTestCA("opi-test-ca"), newTestCA("someone-else")
		roots = x509.NewCertPool()
		roots.AddCert(ca.cert)
		serverCert, serverKey := ca.issue("opi", true)

		ns := newNamespace()
		kubeconfig := restrictedKubeconfig(ns)
		addr := freeAddr()
		o = &opiServer{
			URL: "https://" + addr, Namespace: ns,
			args: []string{"connect", "--kubeconfig", kubeconfig, "--listen", addr, "--namespace", ns, "--create-namespace=false",
				"--tls-cert", writeFile(dir, "server.pem", serverCert), "--tls-key", writeFile(dir, "server-key.pem", serverKey),
				"--tls-client-ca", writeFile(dir, "ca.pem", ca.pem), "--tls-client-names", "cloud-controller"},
			client: clientWith(clientCert(ca), 0),
		}
		o.start()
		DeferCleanup(o.stop)
	})

	It("serves a client whose certificate the configured CA signed", func() {
		desire(o, newApp())
		status, body := o.call("GET", "/apps", "")
		Expect(status).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring("desired_lrp_scheduling_infos"))
	})

	It("refuses a client certificate from another CA", func() {
		_, err := clientWith(clientCert(other), 0).Get(o.URL + "/apps")
		Expect(err).To(HaveOccurred())
	})

	It("refuses, at the handshake, a certificate of the same CA with a name not in tls_client_names", func() {
		_, err := clientWith(clientCertNamed(ca, "diego-cell"), 0).Get(o.URL + "/apps")
		Expect(err).To(MatchError(ContainSubstring("bad certificate")))
	})

	It("refuses a client without a certificate", func() {
		_, err := clientWith(nil, 0).Get(o.URL + "/apps")
		Expect(err).To(HaveOccurred())
	})

	It("refuses TLS older than 1.2", func() {
		_, err := clientWith(clientCert(ca), tls.VersionTLS11).Get(o.URL + "/apps")
		Expect(err).To(HaveOccurred())
	})

	It("refuses plain HTTP on the TLS port", func() {
		resp, err := http.Get("http://" + o.URL[len("https://"):] + "/apps")
		if err == nil {
			defer resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
		}
	})
})

var _ = Describe("Plain HTTP off loopback", func() {
	It("is refused unless the operator opts in", func() {
		session := runOpiOnce("connect", "--kubeconfig", cluster.Kubeconfig(), "--listen", "0.0.0.0:0", "--namespace", "default")
		Expect(session.ExitCode()).To(Equal(2))
		Expect(string(session.Err.Contents())).To(ContainSubstring("refusing to serve plain HTTP"))
	})
})

var _ = Describe("A non-loopback listen with mutual TLS but no client names", func() {
	It("is refused unless the operator opts out in so many words", func() {
		dir := GinkgoT().TempDir()
		ca := newTestCA("opi-test-ca")
		cert, key := ca.issue("opi", true)
		args := []string{"connect", "--kubeconfig", cluster.Kubeconfig(), "--listen", "0.0.0.0:0", "--namespace", "default",
			"--tls-cert", writeFile(dir, "server.pem", cert), "--tls-key", writeFile(dir, "server-key.pem", key),
			"--tls-client-ca", writeFile(dir, "ca.pem", ca.pem)}
		session := runOpiOnce(args...)
		Expect(session.ExitCode()).To(Equal(2))
		Expect(string(session.Err.Contents())).To(ContainSubstring("insecure_any_client_certificate"))
	})
})

var _ = Describe("A non-loopback listen without client certificates", func() {
	It("is refused unless the operator opts out in so many words", func() {
		dir := GinkgoT().TempDir()
		ca := newTestCA("opi-test-ca")
		cert, key := ca.issue("opi", true)
		certFile, keyFile := writeFile(dir, "server.pem", cert), writeFile(dir, "server-key.pem", key)
		for _, args := range [][]string{
			{"--tls-cert", certFile, "--tls-key", keyFile},
			{"--plaintext"},
		} {
			session := runOpiOnce(append([]string{"connect", "--kubeconfig", cluster.Kubeconfig(), "--listen", "0.0.0.0:0", "--namespace", "default"}, args...)...)
			Expect(session.ExitCode()).To(Equal(2), "%v", args)
			Expect(string(session.Err.Contents())).To(ContainSubstring("insecure_skip_client_certificates"), "%v", args)
		}
	})
})
