package main

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"

	"code.cloudfoundry.org/lager/v3/lagertest"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"

	"github.com/opi-bridge/opi/testsupport/pki"
)

var _ = Describe("Certificate rotation", func() {
	var (
		dir                       string
		certFile, keyFile, caFile string
		logger                    *lagertest.TestLogger
		addr                      string
		firstCA                   *pki.CA
		firstServer, firstClient  pki.Pair
	)

	// replace writes data to path as rotations do: a new file renamed over the old one.
	replace := func(path string, data []byte) {
		tmp := path + ".new"
		Expect(os.WriteFile(tmp, data, 0o600)).To(Succeed())
		Expect(os.Rename(tmp, path)).To(Succeed())
	}
	issue := func(name string) (*pki.CA, pki.Pair, pki.Pair) {
		ca, err := pki.NewCA(name)
		Expect(err).NotTo(HaveOccurred())
		server, err := ca.Server("opi")
		Expect(err).NotTo(HaveOccurred())
		client, err := ca.Client("cc")
		Expect(err).NotTo(HaveOccurred())
		return ca, server, client
	}
	// handshake connects as a client trusting ca with the client pair, and returns the server
	// certificate's serial number.
	handshake := func(ca *pki.CA, client pki.Pair) (string, error) {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca.CertPEM)
		cert, err := tls.X509KeyPair(client.CertPEM, client.KeyPEM)
		Expect(err).NotTo(HaveOccurred())
		conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}, ServerName: "127.0.0.1"})
		if err != nil {
			return "", err
		}
		defer conn.Close()
		// TLS 1.3 reports a refused client certificate only on the first read.
		if _, err := conn.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
			return "", err
		}
		if _, err := conn.Read(make([]byte, 1)); err != nil {
			return "", err
		}
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
	}
	serialOf := func(p pki.Pair) string {
		cert, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
		Expect(err).NotTo(HaveOccurred())
		parsed, err := x509.ParseCertificate(cert.Certificate[0])
		Expect(err).NotTo(HaveOccurred())
		return parsed.SerialNumber.String()
	}

	BeforeEach(func() {
		dir = GinkgoT().TempDir()
		firstCA, firstServer, firstClient = issue("first")
		var err error
		certFile, keyFile, err = firstServer.Write(dir, "server")
		Expect(err).NotTo(HaveOccurred())
		caFile, err = firstCA.WriteCert(dir, "client-ca")
		Expect(err).NotTo(HaveOccurred())
		logger = lagertest.NewTestLogger("tls")
	})

	startWith := func(clientNames []string) {
		reloader, err := newCertReloader(certFile, keyFile, caFile, clientNames, logger)
		Expect(err).NotTo(HaveOccurred())
		listener, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		addr = listener.Addr().String()
		server := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})}
		go func() { _ = server.Serve(tls.NewListener(listener, reloader.TLSConfig())) }()
		DeferCleanup(server.Close)
	}
	start := func() { startWith(nil) }

	It("serves the rotated server certificate and client CA without a restart", func() {
		start()

		serial, err := handshake(firstCA, firstClient)
		Expect(err).NotTo(HaveOccurred())
		Expect(serial).To(Equal(serialOf(firstServer)))

		secondCA, secondServer, secondClient := issue("second")
		replace(certFile, secondServer.CertPEM)
		replace(keyFile, secondServer.KeyPEM)
		replace(caFile, secondCA.CertPEM)

		serial, err = handshake(secondCA, secondClient)
		Expect(err).NotTo(HaveOccurred())
		Expect(serial).To(Equal(serialOf(secondServer)))
		Expect(logger.Buffer()).To(gbytes.Say("tls-reloaded"))

		// The old client CA no longer signs acceptable client certificates.
		_, err = handshake(secondCA, firstClient)
		Expect(err).To(HaveOccurred())
	})

	It("keeps serving the last good files while a rotation is half done", func() {
		start()

		_, secondServer, _ := issue("second")
		replace(certFile, secondServer.CertPEM) // the key is still the first one's

		serial, err := handshake(firstCA, firstClient)
		Expect(err).NotTo(HaveOccurred())
		Expect(serial).To(Equal(serialOf(firstServer)))
		Expect(logger.Buffer()).To(gbytes.Say("tls-reload-failed"))

		replace(keyFile, secondServer.KeyPEM)
		_, err = handshake(firstCA, firstClient)
		Expect(err).To(HaveOccurred(), "the second server certificate is not signed by the first CA")
	})

	Describe("with tls_client_names", func() {
		client := func(name string, dnsNames ...string) pki.Pair {
			pair, err := firstCA.Client(name, dnsNames...)
			Expect(err).NotTo(HaveOccurred())
			return pair
		}

		It("accepts a certificate of the client CA only when its CN or a DNS SAN is listed, refusing others at the handshake", func() {
			startWith([]string{"cloud-controller", "cc.service.cf.internal"})

			_, err := handshake(firstCA, client("cloud-controller"))
			Expect(err).NotTo(HaveOccurred(), "CN listed")
			_, err = handshake(firstCA, client("api-worker", "cc.service.cf.internal"))
			Expect(err).NotTo(HaveOccurred(), "DNS SAN listed")

			_, err = handshake(firstCA, client("diego-cell", "cell.service.cf.internal"))
			Expect(err).To(MatchError(ContainSubstring("bad certificate")), "same CA, another name")
			Expect(logger.Buffer()).To(gbytes.Say("client-certificate-refused"))
		})

		It("keeps checking the names after a rotation of the client CA", func() {
			startWith([]string{"cloud-controller"})
			secondCA, _, _ := issue("second")
			replace(caFile, secondCA.CertPEM)
			other, err := secondCA.Client("diego-cell")
			Expect(err).NotTo(HaveOccurred())
			cc, err := secondCA.Client("cloud-controller")
			Expect(err).NotTo(HaveOccurred())

			_, err = handshake(firstCA, cc)
			Expect(err).NotTo(HaveOccurred())
			_, err = handshake(firstCA, other)
			Expect(err).To(HaveOccurred())
		})
	})

	It("refuses to start without loadable files", func() {
		Expect(os.WriteFile(keyFile, []byte("not a key"), 0o600)).To(Succeed())
		_, err := newCertReloader(certFile, keyFile, caFile, nil, logger)
		Expect(err).To(MatchError(ContainSubstring("load tls certificate")))
	})
})

var _ = Describe("The start-up warning about clients", func() {
	It("says that any certificate of the client CA is accepted when tls_client_names is empty", func() {
		logger := lagertest.NewTestLogger("opi")
		warnAboutClients(Config{TLSClientCA: "/etc/opi/tls/ca.crt"}, logger)
		Expect(logger.Buffer()).To(gbytes.Say("warning-any-client-certificate-accepted"))
	})

	It("says nothing when the client names are listed", func() {
		logger := lagertest.NewTestLogger("opi")
		warnAboutClients(Config{TLSClientCA: "/etc/opi/tls/ca.crt", TLSClientNames: []string{"cloud-controller"}}, logger)
		Expect(logger.Buffer().Contents()).To(BeEmpty())
	})

	It("says that anyone may drive opi when client certificates are skipped", func() {
		logger := lagertest.NewTestLogger("opi")
		warnAboutClients(Config{Listen: "0.0.0.0:8085", InsecureSkipClientCertificates: true}, logger)
		Expect(logger.Buffer()).To(gbytes.Say("warning-no-client-certificates"))
	})
})
