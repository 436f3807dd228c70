package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/opi-bridge/opi/k8s"

	"github.com/opi-bridge/opi/gorouter"
)

// NATSConfig is the `nats` section: how opi reaches a classic Cloud Foundry foundation's NATS
// to register routes with its gorouters (kubernetes.routing: nats, and only then).
type NATSConfig struct {
	// URLs are the NATS servers, nats://host:port or tls://host:port, optionally with a user
	// and password (an entry may hold several, comma-separated).
	URLs []string `json:"urls"`
	// User and Password authenticate opi unless a URL carries its own; PasswordFile holds the
	// password instead of Password.
	User         string `json:"user"`
	Password     string `json:"password"`
	PasswordFile string `json:"password_file"`
	// TLS to NATS (BOSH's nats-tls): the servers' CA and opi's client certificate.
	TLS NATSTLSConfig `json:"tls"`
	// DefaultRegisterInterval is how often every registration is sent again until a gorouter
	// announces its own interval (default gorouter.DefaultRegisterInterval).
	DefaultRegisterInterval Duration `json:"default_register_interval"`
	// InsecurePlaintextPassword lets the password (or a URL's credentials) go to a NATS server
	// off loopback without TLS, where anyone on the path can read it. Without it such a
	// configuration is refused at start-up.
	InsecurePlaintextPassword bool `json:"insecure_plaintext_password"`
}

// NATSTLSConfig is `nats.tls`: PEM files.
type NATSTLSConfig struct {
	CAFile   string `json:"ca_file"`
	CertFile string `json:"cert_file"`
	KeyFile  string `json:"key_file"`
}

// bindFlags binds the section's flag: --nats-url, repeatable or comma-separated.
func (c *NATSConfig) bindFlags(fs *flag.FlagSet) {
	fs.Var(&urlList{urls: &c.URLs}, "nats-url", "a NATS server (nats://[user:password@]host:port or tls://...) of the foundation's gorouters, for --routing nats; repeatable, or comma-separated")
	fs.BoolVar(&c.InsecurePlaintextPassword, "nats-insecure-plaintext-password", c.InsecurePlaintextPassword, "allow a NATS password over nats:// (no TLS) to a server that is not on loopback: anyone on the path can read it")
}

// set says whether any key of the section is given.
func (c NATSConfig) set() bool {
	return len(c.URLs) > 0 || c.User != "" || c.Password != "" || c.PasswordFile != "" ||
		c.TLS != (NATSTLSConfig{}) || c.DefaultRegisterInterval.Duration != 0 || c.InsecurePlaintextPassword
}

// gorouter is the section as package gorouter's Config.
func (c NATSConfig) gorouter() gorouter.Config {
	return gorouter.Config{
		URLs:                    c.URLs,
		User:                    c.User,
		Password:                c.Password,
		PasswordFile:            c.PasswordFile,
		CAFile:                  c.TLS.CAFile,
		CertFile:                c.TLS.CertFile,
		KeyFile:                 c.TLS.KeyFile,
		DefaultRegisterInterval: c.DefaultRegisterInterval.Duration,
		AllowPlaintextPassword:  c.InsecurePlaintextPassword,
	}
}

// validate checks the section against the routing mode: required exactly in nats mode. Each
// error names the key; the files named are read (gorouter.Config.Validate). No error holds the
// password or a URL's user and password.
func (c NATSConfig) validate(routing string) error {
	if routing != k8s.RoutingNATS {
		if c.set() {
			return fmt.Errorf("nats is set but kubernetes.routing is %q: the nats section is for routing: nats only", routing)
		}
		return nil
	}
	if len(c.URLs) == 0 {
		return fmt.Errorf("kubernetes.routing: nats needs nats.urls (--nats-url)")
	}
	// key checks one key's own setting with the URLs; whether a password would go in the
	// clear depends on the whole section, checked last.
	key := func(g gorouter.Config) error {
		g.URLs, g.AllowPlaintextPassword = c.URLs, true
		return g.Validate()
	}
	if err := key(gorouter.Config{}); err != nil {
		return fmt.Errorf("nats.urls: %w", err)
	}
	if c.Password != "" && c.PasswordFile != "" {
		return fmt.Errorf("nats.password and nats.password_file exclude each other: configure one")
	}
	if c.PasswordFile != "" {
		if err := key(gorouter.Config{PasswordFile: c.PasswordFile}); err != nil {
			return fmt.Errorf("nats.password_file: %w", err)
		}
	}
	if c.TLS.CAFile != "" {
		if err := key(gorouter.Config{CAFile: c.TLS.CAFile}); err != nil {
			return fmt.Errorf("nats.tls.ca_file: %w", err)
		}
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		return fmt.Errorf("nats.tls.cert_file and nats.tls.key_file go together: set both or neither")
	}
	if c.TLS.CertFile != "" {
		if err := key(gorouter.Config{CertFile: c.TLS.CertFile, KeyFile: c.TLS.KeyFile}); err != nil {
			return fmt.Errorf("nats.tls.cert_file, nats.tls.key_file: %w", err)
		}
	}
	if c.DefaultRegisterInterval.Duration < 0 {
		return fmt.Errorf("nats.default_register_interval must not be negative")
	}
	if d := c.DefaultRegisterInterval.Duration; d != 0 && d < gorouter.MinRegisterInterval {
		return fmt.Errorf("nats.default_register_interval must be at least %s", gorouter.MinRegisterInterval)
	}
	err := c.gorouter().Validate()
	if errors.Is(err, gorouter.ErrPlaintextPassword) {
		return fmt.Errorf("nats.urls: %w with nats.insecure_plaintext_password: true (--nats-insecure-plaintext-password)", err)
	}
	return err
}
