// Package cc is opi's client of Cloud Controller's internal API: the one place that sends the
// callbacks CC waits for (task completions, staging results, crash reports). CC's internal API is
// HTTPS with mutual TLS; plain HTTP is allowed only for loopback URLs (tests, `make run`) or when
// the operator opts in (CC inside the same cluster).
package cc

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/opi-bridge/opi/tlsfiles"
)

const (
	// DefaultDeliveryBound is how long a callback is retried, counted from when it became owed.
	DefaultDeliveryBound = 10 * time.Minute
	// DefaultAttemptTimeout bounds one attempt (CC's own handlers answer in well under this).
	DefaultAttemptTimeout = 30 * time.Second

	firstBackoff = time.Second
	maxBackoff   = 30 * time.Second
	// maxErrorBody bounds how much of a refusal's body is logged.
	maxErrorBody = 512
)

// Options configure a Client. Zero values take the defaults noted.
type Options struct {
	// InternalURL is the base of CC's internal API (e.g.
	// https://cloud-controller-ng.service.cf.internal:9023); crash reports go below it. Empty: no
	// crash reports can be sent.
	InternalURL string
	// ClientCert, ClientKey and CA are PEM files: opi's client certificate for CC's mutual TLS
	// and the CA that signed CC's server certificate. Without CA the system roots are used.
	// The client certificate is read again when its files change (rotation without restart).
	ClientCert, ClientKey, CA string
	// Plaintext allows http:// URLs to hosts that are not loopback.
	Plaintext bool
	// DeliveryBound: DefaultDeliveryBound when 0.
	DeliveryBound time.Duration
	// AttemptTimeout: DefaultAttemptTimeout when 0.
	AttemptTimeout time.Duration
}

// Client posts callbacks to CC. It is safe for concurrent use.
type Client struct {
	http      *http.Client
	logger    lager.Logger
	internal  *url.URL
	plaintext bool
	bound     time.Duration
	backoff   wait.Backoff
}

// StatusError is a callback CC answered with a status other than 2xx.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("cloud controller answered %d: %s", e.Code, e.Body)
}

// ErrNoInternalURL: crash reports need Options.InternalURL.
var ErrNoInternalURL = errors.New("no cloud controller internal url is configured")

// New makes a client; it reads the certificate files once to fail early on a mistake.
func New(opts Options, logger lager.Logger) (*Client, error) {
	if opts.DeliveryBound <= 0 {
		opts.DeliveryBound = DefaultDeliveryBound
	}
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = DefaultAttemptTimeout
	}
	tlsConfig, err := clientTLS(opts, logger.Session("cc-tls"))
	if err != nil {
		return nil, err
	}
	c := &Client{
		http: &http.Client{
			Timeout: opts.AttemptTimeout,
			Transport: &http.Transport{
				Proxy:               http.ProxyFromEnvironment,
				TLSClientConfig:     tlsConfig,
				MaxIdleConnsPerHost: 16,
				IdleConnTimeout:     90 * time.Second,
				TLSHandshakeTimeout: 10 * time.Second,
			},
		},
		logger:    logger.Session("cc-client"),
		plaintext: opts.Plaintext,
		bound:     opts.DeliveryBound,
		backoff:   wait.Backoff{Duration: firstBackoff, Factor: 2, Jitter: 0.2, Steps: 1 << 20, Cap: maxBackoff},
	}
	if opts.InternalURL != "" {
		u, err := c.parse(strings.TrimSuffix(opts.InternalURL, "/"))
		if err != nil {
			return nil, fmt.Errorf("cc internal url: %w", err)
		}
		c.internal = u
	}
	return c, nil
}

// clientTLS is TLS 1.2+ with CC's CA and opi's client certificate, read again whenever its files
// change (tlsfiles).
func clientTLS(opts Options, logger lager.Logger) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if opts.CA != "" {
		pem, err := os.ReadFile(opts.CA)
		if err != nil {
			return nil, fmt.Errorf("read cc ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("cc ca %s holds no PEM certificate", opts.CA)
		}
		cfg.RootCAs = pool
	}
	if (opts.ClientCert == "") != (opts.ClientKey == "") {
		return nil, errors.New("the cc client certificate and key go together")
	}
	if opts.ClientCert != "" {
		pair, err := tlsfiles.New([]string{opts.ClientCert, opts.ClientKey}, func() (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(opts.ClientCert, opts.ClientKey)
			return &cert, err
		}, logger)
		if err != nil {
			return nil, fmt.Errorf("load cc client certificate: %w", err)
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return pair.Get(), nil }
	}
	return cfg, nil
}

// CheckURL tells whether a callback URL can be used: absolute http(s), and http only for a
// loopback host unless plaintext is allowed. Requests carrying a callback URL check it before
// anything is written.
func (c *Client) CheckURL(raw string) error {
	_, err := c.parse(raw)
	return err
}

func (c *Client) parse(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%q is not an absolute URL", raw)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !c.plaintext && !isLoopback(u.Hostname()) {
			return nil, fmt.Errorf("%q: plain http is allowed only to loopback addresses (cc.plaintext allows it)", raw)
		}
	default:
		return nil, fmt.Errorf("%q: scheme must be https or http", raw)
	}
	return u, nil
}

// CrashURL is where CC takes crash reports of an LRP: <internal url>/internal/v4/apps/<process
// guid>/crashed.
func (c *Client) CrashURL(processGUID string) (string, error) {
	if c.internal == nil {
		return "", ErrNoInternalURL
	}
	return c.internal.JoinPath("internal", "v4", "apps", processGUID, "crashed").String(), nil
}

// Post sends body as JSON to target once: nil on a 2xx answer, a *StatusError on any other
// status, or the transport's error.
func (c *Client) Post(ctx context.Context, target string, body any) error {
	u, err := c.parse(target)
	if err != nil {
		return err
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode callback: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("make callback request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_, _ = io.Copy(io.Discard, resp.Body) // let the connection be reused
	if resp.StatusCode/100 != 2 {
		return &StatusError{Code: resp.StatusCode, Body: strings.TrimSpace(string(text))}
	}
	return nil
}

// Deliver posts body to target until CC accepts it, and returns nil once the callback is
// settled: accepted (2xx), refused for good (4xx: logged, not retried), unusable (a bad URL:
// logged), or not accepted by the time the delivery bound has passed since owedSince (logged).
// Network errors and 5xx answers are retried with a jittered exponential backoff (1 s doubling to
// 30 s). Only the context ending makes it return an error: the callback is then still owed.
func (c *Client) Deliver(ctx context.Context, kind, target string, body any, owedSince time.Time) error {
	logger := c.logger.Session("deliver", lager.Data{"kind": kind, "url": redactURL(target)})
	deadline := owedSince.Add(c.bound)
	backoff := c.backoff
	for attempt := 1; ; attempt++ {
		err := c.Post(ctx, target, body)
		var status *StatusError
		switch {
		case err == nil:
			logger.Info("delivered", lager.Data{"attempts": attempt})
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("deliver %s callback: %w", kind, ctx.Err())
		case errors.As(err, &status) && status.Code/100 == 4:
			logger.Error("refused", err, lager.Data{"attempts": attempt})
			return nil
		case status == nil && !retryable(err):
			logger.Error("unusable", err)
			return nil
		}
		wait := backoff.Step()
		if left := time.Until(deadline); left <= 0 {
			logger.Error("gave-up", err, lager.Data{"attempts": attempt, "bound": c.bound.String()})
			return nil
		} else if wait > left {
			wait = left
		}
		logger.Info("retrying", lager.Data{"attempt": attempt, "error": err.Error(), "in": wait.String()})
		select {
		case <-ctx.Done():
			return fmt.Errorf("deliver %s callback: %w", kind, ctx.Err())
		case <-time.After(wait):
		}
	}
}

// retryable tells transport errors (worth another attempt) from a URL that can never work.
func retryable(err error) bool {
	var urlErr *url.Error
	return errors.As(err, &urlErr)
}

// redactURL keeps a URL's scheme, host and path for logs (a query could carry a token).
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Scheme + "://" + u.Host + u.Path
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
