package sshproxy

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"
)

// Fingerprints are the host key's fingerprints in the three forms the cf CLI checks
// (CC's app_ssh.host_key_fingerprint holds one of them).
type Fingerprints struct {
	// SHA256 is the unpadded base64 of the key's SHA-256 ("SHA256:" not included).
	SHA256 string `json:"sha256"`
	// SHA1 is the key's SHA-1 in colon-separated lower-case hex.
	SHA1 string `json:"sha1"`
	// MD5 is the key's MD5 in colon-separated lower-case hex.
	MD5 string `json:"md5"`
}

// FingerprintsOf computes the fingerprints of a public key.
func FingerprintsOf(key ssh.PublicKey) Fingerprints {
	sum := sha1.Sum(key.Marshal())
	parts := make([]string, len(sum))
	for i, c := range sum {
		parts[i] = hex.EncodeToString([]byte{c})
	}
	return Fingerprints{
		SHA256: strings.TrimPrefix(ssh.FingerprintSHA256(key), "SHA256:"),
		SHA1:   strings.Join(parts, ":"),
		MD5:    ssh.FingerprintLegacyMD5(key),
	}
}

// LoadHostKey reads the proxy's host key from a PEM file (PKCS #1, PKCS #8, EC or OpenSSH).
func LoadHostKey(path string) (ssh.Signer, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the host key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		return nil, fmt.Errorf("parsing the host key %s: %w", path, err)
	}
	return signer, nil
}
