// Package sshlocal runs `opi ssh-proxy` on a local control plane as `make run` offers it: with
// the UAA and Cloud Controller ssh_access stand-ins, as the ServiceAccount of the ssh-proxy
// component's Role, and with what OpenSSH needs to reach it without a question (a known_hosts
// file holding the proxy's host key, an askpass script answering the stand-in's one-time code).
// cmd/opi-local starts it and prints its commands; the integration suite runs those commands.
package sshlocal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/opi-bridge/opi/localkube"
	"github.com/opi-bridge/opi/testsupport/sshstandin"
)

// The UAA stand-in's client (the proxy's) and the one code it exchanges: any user typing it
// comes in, as after `cf ssh-code`.
const (
	ClientID     = "ssh-proxy"
	ClientSecret = "opi-local-ssh-proxy-secret"
	Code         = "opi-local-ssh-code"
)

// ServiceAccount is the proxy's identity in the component's rbac.yaml.
const ServiceAccount = "opi-ssh-proxy"

// componentNamespace is the namespace the component's manifests name.
const componentNamespace = "cf-workloads"

// readyTimeout bounds the wait for the proxy's caches and listener.
const readyTimeout = 2 * time.Minute

// Cluster is what the proxy needs of the local control plane: a kubeconfig of the component's
// ServiceAccount, with exactly its Role's rights.
type Cluster interface {
	ServiceAccountKubeconfig(ctx context.Context, manifest, namespace, name string) (string, error)
}

// Options say how to run the proxy.
type Options struct {
	// OpiBin is the opi binary.
	OpiBin string
	// Namespace and Backend are opi's.
	Namespace, Backend string
	// RBAC is the component's rbac.yaml; its namespace becomes Namespace.
	RBAC string
	// Listen is the SSH address ("" a free loopback port).
	Listen string
	// Dir holds the host key, known_hosts, the askpass script and the proxy's log.
	Dir string
	// Grants are the Cloud Controller stand-in's answers: a process guid a user may name, and
	// the "<guid>-<version>" CC grants for it.
	Grants map[string]string
	// ExtraArgs are more flags of the proxy (where its SSH lines go).
	ExtraArgs []string
}

// Proxy is a running proxy and what reaches it.
type Proxy struct {
	// Addr is its SSH address, OpsAddr its ops endpoint's.
	Addr, OpsAddr string
	// SHA256 and MD5 are its host key's fingerprints (CC's app_ssh.host_key_fingerprint).
	SHA256, MD5 string
	// KnownHosts holds the host key for Addr; Askpass answers OpenSSH's password question with
	// Code; Log is the proxy's output.
	KnownHosts, Askpass, Log string
	// Args are the proxy's command-line arguments.
	Args []string

	standin *sshstandin.Server
	proc    *localkube.Process
}

// Start starts the stand-ins and the proxy and waits until the proxy is ready.
func Start(ctx context.Context, c Cluster, o Options) (*Proxy, error) {
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("making the proxy's folder: %w", err)
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, strings.ReplaceAll(o.RBAC, componentNamespace, o.Namespace), o.Namespace, ServiceAccount)
	if err != nil {
		return nil, fmt.Errorf("applying the proxy's role: %w", err)
	}
	p := &Proxy{Addr: o.Listen, Log: filepath.Join(o.Dir, "opi-ssh-proxy.log")}
	if p.Addr == "" {
		if p.Addr, err = localkube.FreeAddr(); err != nil {
			return nil, err
		}
	}
	if p.OpsAddr, err = localkube.FreeAddr(); err != nil {
		return nil, err
	}
	keyFile, err := p.writeFiles(o.Dir)
	if err != nil {
		return nil, err
	}
	p.standin = sshstandin.Start(sshstandin.Options{ClientID: ClientID, ClientSecret: ClientSecret, Code: Code, UserID: "opi-local-user", Grants: o.Grants})
	p.Args = append([]string{"ssh-proxy", "--kubeconfig", kubeconfig, "--namespace", o.Namespace, "--backend", o.Backend,
		"--listen", p.Addr, "--ops-listen", p.OpsAddr, "--host-key", keyFile,
		"--uaa-token-url", p.standin.TokenURL(), "--uaa-client-id", ClientID, "--uaa-client-secret-file", filepath.Join(o.Dir, "uaa-client-secret"),
		"--cc-api-url", p.standin.CCURL()}, o.ExtraArgs...)
	if p.proc, err = localkube.StartProcess("opi-ssh-proxy", o.OpiBin, p.Args, os.Environ(), nil, p.Log); err != nil {
		p.standin.Close()
		return nil, err
	}
	if err := p.proc.WaitHTTP(ctx, "http://"+p.OpsAddr+"/readyz", readyTimeout); err != nil {
		return nil, errors.Join(fmt.Errorf("waiting for the ssh proxy to be ready (log %s): %w", p.Log, err), p.Stop())
	}
	return p, nil
}

// writeFiles writes a new host key, the known_hosts line for it at p.Addr, the askpass script
// and the client secret (a file, as the component mounts it), and returns the key's path.
func (p *Proxy) writeFiles(dir string) (string, error) {
	keyFile := filepath.Join(dir, "host-key.pem")
	hostKey, err := sshstandin.WriteHostKey(keyFile)
	if err != nil {
		return "", err
	}
	p.SHA256, p.MD5 = ssh.FingerprintSHA256(hostKey), ssh.FingerprintLegacyMD5(hostKey)
	files, err := sshstandin.WriteClientFiles(dir, p.Addr, Code, hostKey)
	if err != nil {
		return "", err
	}
	p.KnownHosts, p.Askpass = files.KnownHosts, files.Askpass
	if err := os.WriteFile(filepath.Join(dir, "uaa-client-secret"), []byte(ClientSecret+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing the client secret: %w", err)
	}
	return keyFile, nil
}

// Command is a shell line running OpenSSH against the proxy as the cf CLI's user for instance
// index of process guid, the code given by the askpass script and the host key checked against
// known_hosts: options before the destination, command ("" a shell) quoted after it.
func (p *Proxy) Command(guid string, index int, options []string, command string) string {
	host, port, _ := net.SplitHostPort(p.Addr)
	line := []string{"SSH_ASKPASS=" + p.Askpass, "SSH_ASKPASS_REQUIRE=force", "ssh", "-p", port,
		"-o", "UserKnownHostsFile=" + p.KnownHosts, "-o", "StrictHostKeyChecking=yes", "-o", "PreferredAuthentications=password"}
	line = append(line, options...)
	line = append(line, sshstandin.User(guid, index)+"@"+host)
	if command != "" {
		line = append(line, "'"+strings.ReplaceAll(command, "'", `'\''`)+"'")
	}
	return strings.Join(line, " ")
}

// Done is closed when the proxy has exited.
func (p *Proxy) Done() <-chan struct{} { return p.proc.Done() }

// Stop stops the proxy (SIGTERM), then the stand-ins.
func (p *Proxy) Stop() error {
	err := p.proc.Stop()
	p.standin.Close()
	return err
}
