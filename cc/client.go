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
	// DefaultMaxPerEndpoint is how many deliveries to one endpoint may be in progress at once:
	// fewer than the smallest reporter's workers (4), so an endpoint that does not answer holds
	// at most two of them and the others keep delivering elsewhere.
	DefaultMaxPerEndpoint = 2

	firstBackoff = time.Second
	maxBackoff   = 30 * time.Second
	// maxErrorBody bounds how much of a refusal's body is logged.
	maxErrorBody = 512
	// tlsHandshakeTimeout bounds one TLS handshake with an endpoint.
	tlsHandshakeTimeout = 10 * time.Second
)

// Options configure a Client. Zero values take the defaults noted.
type Options struct {
	// InternalURL is the base of CC's internal API (e.g.
	// https://cloud-controller-ng.service.cf.internal:9023); crash reports go below it, and task
	// and staging callbacks may go to its scheme, host and port. Empty: no crash reports can be
	// sent.
	InternalURL string
	// CallbackURLs are further endpoints task and staging callbacks may go to: only their scheme,
	// host and port count (a path is ignored). With neither InternalURL nor CallbackURLs no
	// callback URL is allowed.
	CallbackURLs []string
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
	// MaxPerEndpoint bounds the deliveries in progress to one endpoint (scheme, host, port) at
	// once: DefaultMaxPerEndpoint when 0.
	MaxPerEndpoint int
}

// Client posts callbacks to CC. It is safe for concurrent use.
type Client struct {
	http      *http.Client
	logger    lager.Logger
	internal  *url.URL
	plaintext bool
	bound     time.Duration
	backoff   wait.Backoff

	// endpoints are the allowed endpoints, each with its delivery slots (a semaphore of
	// MaxPerEndpoint). The set is fixed at New, so it is read without a lock.
	endpoints map[endpoint]chan struct{}
	// tls is the configuration of every connection, without the client certificate: clientCert
	// is added to a connection's own copy only once its address was checked (dialTLS).
	tls        *tls.Config
	clientCert func(*tls.CertificateRequestInfo) (*tls.Certificate, error)
	dialer     net.Dialer
}

// endpoint is what an allowed callback URL is matched on: scheme, lower-case host and port (the
// scheme's default when the URL names none), as http.Transport dials it.
type endpoint struct{ scheme, host, port string }

func endpointOf(u *url.URL) endpoint {
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
	}
	return endpoint{scheme: u.Scheme, host: strings.ToLower(u.Hostname()), port: port}
}

func (e endpoint) String() string { return e.scheme + "://" + net.JoinHostPort(e.host, e.port) }

// StatusError is a callback CC answered with a status other than 2xx.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("cloud controller answered %d: %s", e.Code, e.Body)
}

var (
	// ErrNoInternalURL: crash reports need Options.InternalURL.
	ErrNoInternalURL = errors.New("no cloud controller internal url is configured")
	// ErrNoEndpoints: with neither Options.InternalURL nor Options.CallbackURLs no callback
	// URL is allowed.
	ErrNoEndpoints = errors.New("no callback endpoint is configured: the operator must configure cc.internal_url or cc.callback_urls")
	// ErrNotAllowed is a callback URL or a connection to an endpoint that is neither
	// cc.internal_url's nor one of cc.callback_urls.
	ErrNotAllowed = errors.New("is not cc.internal_url's endpoint nor one of cc.callback_urls (scheme, host and port must match)")
	// ErrEndpointBusy: the endpoint's share of concurrent deliveries is in use. The callback is
	// still owed; the caller tries again later.
	ErrEndpointBusy = errors.New("the endpoint's share of concurrent deliveries is in use")
)

// New makes a client; it reads the certificate files once to fail early on a mistake.
func New(opts Options, logger lager.Logger) (*Client, error) {
	if opts.DeliveryBound <= 0 {
		opts.DeliveryBound = DefaultDeliveryBound
	}
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = DefaultAttemptTimeout
	}
	if opts.MaxPerEndpoint <= 0 {
		opts.MaxPerEndpoint = DefaultMaxPerEndpoint
	}
	tlsConfig, clientCert, err := clientTLS(opts, logger.Session("cc-tls"))
	if err != nil {
		return nil, err
	}
	c := &Client{
		logger:     logger.Session("cc-client"),
		plaintext:  opts.Plaintext,
		bound:      opts.DeliveryBound,
		backoff:    wait.Backoff{Duration: firstBackoff, Factor: 2, Jitter: 0.2, Steps: 1 << 20, Cap: maxBackoff},
		endpoints:  map[endpoint]chan struct{}{},
		tls:        tlsConfig,
		clientCert: clientCert,
		dialer:     net.Dialer{Timeout: opts.AttemptTimeout, KeepAlive: 30 * time.Second},
	}
	c.http = &http.Client{
		Timeout: opts.AttemptTimeout,
		// No redirect is followed: the answer would choose where the callback (and, over TLS,
		// opi's client certificate) goes next. A 3xx is a refusal (see Deliver).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			// No proxy: callbacks go straight to an allowed endpoint, and the dialers check the
			// address they are given, which through a proxy would be the proxy's.
			Proxy:               nil,
			DialContext:         c.dial,
			DialTLSContext:      c.dialTLS,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
		},
	}
	allow := func(raw string) (*url.URL, error) {
		u, err := c.parse(raw)
		if err != nil {
			return nil, err
		}
		if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("%s: an endpoint has no user, query or fragment", Redact(raw))
		}
		if e := endpointOf(u); c.endpoints[e] == nil {
			c.endpoints[e] = make(chan struct{}, opts.MaxPerEndpoint)
		}
		return u, nil
	}
	if opts.InternalURL != "" {
		u, err := allow(strings.TrimSuffix(opts.InternalURL, "/"))
		if err != nil {
			return nil, fmt.Errorf("cc internal url: %w", err)
		}
		c.internal = u
	}
	for _, raw := range opts.CallbackURLs {
		if _, err := allow(raw); err != nil {
			return nil, fmt.Errorf("cc callback url: %w", err)
		}
	}
	return c, nil
}

// clientTLS is TLS 1.2+ with CC's CA, and opi's client certificate, read again whenever its
// files change (tlsfiles). The certificate is returned apart, for dialTLS to add to a
// connection only once its address was checked.
func clientTLS(opts Options, logger lager.Logger) (*tls.Config, func(*tls.CertificateRequestInfo) (*tls.Certificate, error), error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if opts.CA != "" {
		pem, err := os.ReadFile(opts.CA)
		if err != nil {
			return nil, nil, fmt.Errorf("read cc ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("cc ca %s holds no PEM certificate", opts.CA)
		}
		cfg.RootCAs = pool
	}
	if (opts.ClientCert == "") != (opts.ClientKey == "") {
		return nil, nil, errors.New("the cc client certificate and key go together")
	}
	if opts.ClientCert == "" {
		return cfg, nil, nil
	}
	pair, err := tlsfiles.New([]string{opts.ClientCert, opts.ClientKey}, func() (*tls.Certificate, error) {
		cert, err := tls.LoadX509KeyPair(opts.ClientCert, opts.ClientKey)
		return &cert, err
	}, logger)
	if err != nil {
		return nil, nil, fmt.Errorf("load cc client certificate: %w", err)
	}
	return cfg, func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return pair.Get(), nil }, nil
}

// checkDial refuses an address that is not an allowed endpoint of the scheme. It is the second
// check, after the URL's (CheckURL): whatever a URL, a redirect or a proxy setting would make
// the transport dial, only an allowed host and port are connected to.
func (c *Client) checkDial(scheme, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("dial %s: %w", addr, err)
	}
	if c.endpoints[endpoint{scheme: scheme, host: strings.ToLower(host), port: port}] == nil {
		return fmt.Errorf("dial %s://%s: %w", scheme, addr, ErrNotAllowed)
	}
	return nil
}

// dial connects for plain http.
func (c *Client) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if err := c.checkDial("http", addr); err != nil {
		return nil, err
	}
	return c.dialer.DialContext(ctx, network, addr)
}

// dialTLS connects for https. The client certificate is in the connection's configuration only
// here, after the address was checked: opi's certificate is presented to allowed endpoints only.
func (c *Client) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	if err := c.checkDial("https", addr); err != nil {
		return nil, err
	}
	host, _, _ := net.SplitHostPort(addr)
	conn, err := c.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	cfg := c.tls.Clone()
	cfg.ServerName = host
	cfg.GetClientCertificate = c.clientCert
	tlsConn := tls.Client(conn, cfg)
	handshake, cancel := context.WithTimeout(ctx, tlsHandshakeTimeout)
	defer cancel()
	if err := tlsConn.HandshakeContext(handshake); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return tlsConn, nil
}

// CheckURL tells whether a callback URL can be used: absolute http(s), http only for a loopback
// host unless plaintext is allowed, and scheme, host and port those of cc.internal_url or of
// one of cc.callback_urls. Requests carrying a callback URL check it before anything is written.
// Its errors name the URL redacted (Redact).
func (c *Client) CheckURL(raw string) error {
	_, err := c.allowed(raw)
	return err
}

// allowed parses raw and checks it is an allowed endpoint's.
func (c *Client) allowed(raw string) (*url.URL, error) {
	if len(c.endpoints) == 0 {
		return nil, ErrNoEndpoints
	}
	u, err := c.parse(raw)
	if err != nil {
		return nil, err
	}
	if c.endpoints[endpointOf(u)] == nil {
		return nil, fmt.Errorf("%s %w", Redact(raw), ErrNotAllowed)
	}
	return u, nil
}

func (c *Client) parse(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, errors.New("is not an absolute URL")
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !c.plaintext && !IsLoopback(u.Hostname()) {
			return nil, fmt.Errorf("%s: plain http is allowed only to loopback addresses (cc.plaintext allows it)", Redact(raw))
		}
	default:
		return nil, fmt.Errorf("%s: scheme must be https or http", Redact(raw))
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
// status (a redirect is not followed), or the transport's error. target must be an allowed
// endpoint's (CheckURL). Its errors name the URL redacted.
func (c *Client) Post(ctx context.Context, target string, body any) error {
	u, err := c.allowed(target)
	if err != nil {
		return err
	}
	return c.post(ctx, u, body)
}

func (c *Client) post(ctx context.Context, u *url.URL, body any) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode callback: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("make callback request: %s", Redact(u.String()))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		// The transport's error names the whole URL, which may carry a token in its query.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			urlErr.URL = Redact(urlErr.URL)
		}
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
// settled: accepted (2xx), refused for good (3xx or 4xx: logged, not retried), unusable (a URL
// that is not an allowed endpoint's: logged), or not accepted by the time the delivery bound has
// passed since owedSince (logged). Network errors and 5xx answers are retried with a jittered
// exponential backoff (1 s doubling to 30 s).
//
// At most Options.MaxPerEndpoint deliveries to one endpoint are in progress at once; beyond
// that Deliver returns ErrEndpointBusy at once, so an endpoint that does not answer holds no
// more than its share of the callers' workers. That and the context ending are the only errors:
// the callback is then still owed, and the caller tries again later.
func (c *Client) Deliver(ctx context.Context, kind, target string, body any, owedSince time.Time) error {
	logger := c.logger.Session("deliver", lager.Data{"kind": kind, "url": Redact(target)})
	deadline := owedSince.Add(c.bound)
	u, err := c.allowed(target)
	if err != nil {
		logger.Error("unusable", err)
		return nil
	}
	slots := c.endpoints[endpointOf(u)]
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	default:
		if !time.Now().Before(deadline) {
			logger.Error("gave-up", ErrEndpointBusy, lager.Data{"bound": c.bound.String()})
			return nil
		}
		return fmt.Errorf("deliver %s callback to %s: %w", kind, endpointOf(u), ErrEndpointBusy)
	}
	backoff := c.backoff
	for attempt := 1; ; attempt++ {
		err := c.post(ctx, u, body)
		var status *StatusError
		switch {
		case err == nil:
			logger.Info("delivered", lager.Data{"attempts": attempt})
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("deliver %s callback: %w", kind, ctx.Err())
		case errors.As(err, &status) && (status.Code/100 == 4 || status.Code/100 == 3):
			// A redirect is a refusal too: following it would let the answer choose where the
			// callback goes, and asking again gets the same redirect. CC's internal API does
			// not redirect; a 3xx means a wrong URL or something between opi and CC.
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
	return errors.As(err, &urlErr) && !errors.Is(err, ErrNotAllowed)
}

// Redact is a URL as logs and error messages may show it: scheme, host and path, without the
// user information and query (either may carry a credential) or fragment.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
}

// IsLoopback tells whether host (a URL's or a listen address's) only reaches this machine:
// where plain HTTP exposes nothing on the network.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
