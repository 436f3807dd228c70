package main

import (
	"context"
	"flag"
	"fmt"
	"net"

	"code.cloudfoundry.org/lager/v3"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/loggregator"
)

// LoggregatorConfig is the `loggregator` section: where opi's leader sends the CELL lines of
// the apps' instances (package k8s/internal/lifecycle), and `opi ssh-proxy` its SSH lines.
// Absent: no lines.
type LoggregatorConfig struct {
	// Addr is Loggregator's v2 ingress, host:port (a Doppler's, or a Loggregator agent
	// reachable from the cluster).
	Addr string `json:"addr"`
	// TLS are the PEM files of mutual TLS, which the v2 ingress requires: all three.
	TLS LoggregatorTLSConfig `json:"tls"`
	// ServerName is the name the ingress's certificate holds (default metron; doppler for a
	// Doppler).
	ServerName string `json:"server_name"`
}

// LoggregatorTLSConfig is `loggregator.tls`: PEM files.
type LoggregatorTLSConfig struct {
	CAFile   string `json:"ca_file"`
	CertFile string `json:"cert_file"`
	KeyFile  string `json:"key_file"`
}

// bindFlags binds the section's flags, named as the agent's (opi agent).
func (c *LoggregatorConfig) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Addr, "loggregator-addr", c.Addr, "Loggregator's v2 ingress, HOST:PORT, for the lines opi puts into the apps' log streams (none: no lines)")
	fs.StringVar(&c.TLS.CAFile, "loggregator-ca", c.TLS.CAFile, "CA (PEM) of the Loggregator ingress's certificate")
	fs.StringVar(&c.TLS.CertFile, "loggregator-cert", c.TLS.CertFile, "client certificate (PEM) presented to the Loggregator ingress")
	fs.StringVar(&c.TLS.KeyFile, "loggregator-key", c.TLS.KeyFile, "client key (PEM) for the Loggregator ingress")
	fs.StringVar(&c.ServerName, "loggregator-server-name", c.ServerName, "name the Loggregator ingress's certificate holds (default metron; doppler for a Doppler)")
}

// set says whether any key of the section is given.
func (c LoggregatorConfig) set() bool {
	return c.Addr != "" || c.ServerName != "" || c.TLS != (LoggregatorTLSConfig{})
}

// validate refuses a half-set section: an address needs all three TLS files, and the files or
// a server name need an address. The files are read at start-up (wireLoggregator).
func (c LoggregatorConfig) validate() error {
	if !c.set() {
		return nil
	}
	if c.Addr == "" {
		return fmt.Errorf("loggregator.tls and loggregator.server_name need loggregator.addr (--loggregator-addr)")
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("loggregator.addr %q is not host:port", c.Addr)
	}
	var missing []string
	for _, f := range []struct{ key, value string }{
		{"loggregator.tls.ca_file (--loggregator-ca)", c.TLS.CAFile},
		{"loggregator.tls.cert_file (--loggregator-cert)", c.TLS.CertFile},
		{"loggregator.tls.key_file (--loggregator-key)", c.TLS.KeyFile},
	} {
		if f.value == "" {
			missing = append(missing, f.key)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("loggregator needs mutual TLS: set %v", missing)
	}
	return nil
}

// sender is the section as package loggregator's SenderConfig.
func (c LoggregatorConfig) sender() loggregator.SenderConfig {
	return loggregator.SenderConfig{Addr: c.Addr, CAFile: c.TLS.CAFile, CertFile: c.TLS.CertFile, KeyFile: c.TLS.KeyFile, ServerName: c.ServerName}
}

// wireLoggregator makes the Sender of the lifecycle lines and sends with it until the returned
// stop is called; a section not set wires nothing.
func wireLoggregator(cfg LoggregatorConfig, logger lager.Logger, opts *k8s.Options) (func(), error) {
	sender, stop, err := startLoggregator(cfg, logger)
	if err != nil {
		return nil, err
	}
	if sender == nil {
		logger.Info("lifecycle-lines-off", lager.Data{"reason": "no loggregator.addr configured"})
		return stop, nil
	}
	opts.Clients.Lifecycle = sender
	logger.Info("lifecycle-lines", lager.Data{"loggregator": cfg.Addr})
	return stop, nil
}

// startLoggregator makes the section's Sender (its TLS files read now: a file that cannot be
// read is refused at start-up) and sends with it until the returned stop is called; a section
// not set makes none (nil). Loggregator being down is no error: the Sender buffers (bounded)
// and retries, and readiness does not depend on it.
func startLoggregator(cfg LoggregatorConfig, logger lager.Logger) (*loggregator.Sender, func(), error) {
	if !cfg.set() {
		return nil, func() {}, nil
	}
	sender, err := loggregator.NewSender(cfg.sender(), logger)
	if err != nil {
		return nil, nil, fmt.Errorf("loggregator: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = sender.Run(ctx)
	}()
	return sender, func() {
		cancel()
		<-done
		_ = sender.Close()
	}, nil
}
