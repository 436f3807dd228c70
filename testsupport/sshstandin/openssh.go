package sshstandin

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"

	"golang.org/x/crypto/ssh"
)

// WriteHostKey makes an ed25519 host key, writes it to path as PEM (PKCS #8, what the proxy's
// --host-key reads) and returns its public half.
func WriteHostKey(path string) (ssh.PublicKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the host key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("encoding the host key: %w", err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, fmt.Errorf("writing the host key: %w", err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("reading the host key: %w", err)
	}
	return signer.PublicKey(), nil
}

// ProxyFlags are the flags that make `opi ssh-proxy` ask the stand-ins, as their one client.
func (s *Server) ProxyFlags() []string {
	return []string{
		"--uaa-token-url", s.TokenURL(), "--uaa-client-id", s.o.ClientID, "--uaa-client-secret", s.o.ClientSecret,
		"--cc-api-url", s.CCURL(),
	}
}

// OpenSSH runs OpenSSH's programs against a proxy as a user would: the proxy's host key their
// only known host, the code typed through SSH_ASKPASS.
type OpenSSH struct {
	addr, user, knownHosts, askpass string
	// logLevel is the programs'; INFO shows the proxy's banner, where its refusals are.
	logLevel string
}

// ClientFiles are what OpenSSH needs to reach a proxy without a question: a known_hosts file
// holding the proxy's host key at its address, and an askpass script answering the code.
type ClientFiles struct{ KnownHosts, Askpass string }

// WriteClientFiles writes the client files for a proxy at addr into dir.
func WriteClientFiles(dir, addr, code string, hostKey ssh.PublicKey) (ClientFiles, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ClientFiles{}, fmt.Errorf("reading the proxy's address: %w", err)
	}
	f := ClientFiles{KnownHosts: filepath.Join(dir, "known_hosts"), Askpass: filepath.Join(dir, "askpass")}
	line := fmt.Sprintf("[%s]:%s %s", host, port, ssh.MarshalAuthorizedKey(hostKey))
	if err := os.WriteFile(f.KnownHosts, []byte(line), 0o600); err != nil {
		return ClientFiles{}, fmt.Errorf("writing the known hosts: %w", err)
	}
	// OpenSSH runs it for the password when SSH_ASKPASS_REQUIRE=force.
	if err := os.WriteFile(f.Askpass, []byte("#!/bin/sh\necho '"+code+"'\n"), 0o700); err != nil {
		return ClientFiles{}, fmt.Errorf("writing the askpass script: %w", err)
	}
	return f, nil
}

// NewOpenSSH writes the client files into dir for a proxy at addr and returns the client for
// user.
func NewOpenSSH(dir, addr, user, code string, hostKey ssh.PublicKey) (*OpenSSH, error) {
	f, err := WriteClientFiles(dir, addr, code, hostKey)
	if err != nil {
		return nil, err
	}
	return &OpenSSH{addr: addr, user: user, knownHosts: f.KnownHosts, askpass: f.Askpass, logLevel: "ERROR"}, nil
}

// Logging is o with the programs' log level.
func (o *OpenSSH) Logging(level string) *OpenSSH {
	c := *o
	c.logLevel = level
	return &c
}

// Host is the proxy's host, as OpenSSH's programs name it.
func (o *OpenSSH) Host() string {
	host, _, _ := net.SplitHostPort(o.addr)
	return host
}

// Command is `ssh` through the proxy with args after the host; no configuration file is read.
func (o *OpenSSH) Command(args ...string) *exec.Cmd {
	return o.Program("ssh", append([]string{o.Host()}, args...)...)
}

// Program is one of OpenSSH's programs (ssh, sftp, scp) reaching the user's instance through the
// proxy; args name the proxy's host (Host) where the program expects it.
func (o *OpenSSH) Program(name string, args ...string) *exec.Cmd {
	_, port, _ := net.SplitHostPort(o.addr)
	cmd := exec.Command(name, append([]string{
		"-F", "none", "-o", "Port=" + port, "-o", "User=" + o.user,
		"-o", "UserKnownHostsFile=" + o.knownHosts, "-o", "StrictHostKeyChecking=yes",
		"-o", "PreferredAuthentications=password", "-o", "PubkeyAuthentication=no",
		"-o", "NumberOfPasswordPrompts=1", "-o", "LogLevel=" + o.logLevel,
		// sftp -b asks ssh for batch mode, which never asks for a password (the code); the
		// first value given wins.
		"-o", "BatchMode=no",
	}, args...)...)
	// OpenSSH asks SSH_ASKPASS for the password (the code) when told to.
	cmd.Env = append(os.Environ(), "SSH_ASKPASS="+o.askpass, "SSH_ASKPASS_REQUIRE=force", "DISPLAY=none")
	return cmd
}
