// Package gorouter keeps app instances registered with a Cloud Foundry foundation's gorouters
// over NATS, as Diego's route emitter does: `router.register` and `router.unregister` messages,
// re-sent at the interval the gorouters announce (`router.greet`, `router.start`). It knows
// nothing of Kubernetes: its caller says which registrations exist (Emitter.Set, Delete,
// Replace) and while it is the leader (Emitter.Run).
package gorouter

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"github.com/nats-io/nats.go"

	"github.com/opi-bridge/opi/tlsfiles"
)

const (
	// DefaultRegisterInterval is the re-registration interval until a gorouter has announced
	// one: BOSH's routing-release job defaults `router.requested_route_registration_interval_in_seconds`
	// to 20 s (gorouter's own built-in default, 5 s, is overridden by every BOSH deployment), and
	// it is well inside the default prune threshold of 120 s.
	DefaultRegisterInterval = 20 * time.Second

	// MinRegisterInterval is the shortest re-registration interval opi keeps, whatever a
	// gorouter announces (whole seconds, so 1 s is the shortest a real gorouter asks for) or
	// the configuration says: anyone who may publish on NATS can announce an interval.
	MinRegisterInterval = time.Second

	// connectionName is what NATS' monitoring (/connz) shows for opi's connection.
	connectionName = "opi"

	// Reconnect backoff: the first delay after every server of the list failed, doubled per
	// further round up to maxReconnectDelay, each plus up to half of it at random so that the
	// replicas of opi (and the rest of a foundation) do not all come back at the same instant
	// after NATS restarts. The ceiling keeps a reconnect well inside gorouter's prune threshold.
	firstReconnectDelay = 250 * time.Millisecond
	maxReconnectDelay   = 10 * time.Second
	connectTimeout      = 5 * time.Second
	flushTimeout        = 10 * time.Second
)

// ErrPlaintextPassword is Validate's refusal to send a password in the clear off loopback.
var ErrPlaintextPassword = errors.New("nats: refusing to send a password in the clear")

// Config is how opi reaches NATS. The zero DefaultRegisterInterval takes DefaultRegisterInterval.
type Config struct {
	// URLs of the NATS servers, nats://host:port or tls://host:port, optionally with user and
	// password (nats://user:pass@host:port); an element may hold several, comma-separated. A
	// URL's own user and password win over User and Password for that URL (nats.go's rule).
	URLs []string
	// User and Password authenticate opi, unless a URL carries its own.
	User     string
	Password string
	// PasswordFile holds the password instead (read once at start, a trailing newline dropped);
	// Password and PasswordFile exclude each other.
	PasswordFile string
	// CAFile is the PEM bundle that signed the NATS servers' certificates; it turns TLS on.
	// Without it (and with tls:// URLs) the system roots are used.
	CAFile string
	// CertFile and KeyFile are opi's client certificate (BOSH's nats-tls requires one), read
	// again when they change on disk.
	CertFile, KeyFile string
	// DefaultRegisterInterval is used until a gorouter announces its minimum register interval.
	DefaultRegisterInterval time.Duration
	// AllowPlaintextPassword lets a password (or a URL's user and password, or token) go in
	// the clear to NATS servers that are not on loopback: without TLS (a tls:// URL, CAFile
	// or CertFile) such a configuration is refused unless set.
	AllowPlaintextPassword bool
}

// Validate says what is wrong with the configuration, reading every file it names.
func (c Config) Validate() error {
	urls, err := c.servers()
	if err != nil {
		return err
	}
	if len(urls) == 0 {
		return errors.New("nats: no server URL configured")
	}
	if c.Password != "" && c.PasswordFile != "" {
		return errors.New("nats: password and password file are both set: configure one")
	}
	if c.PasswordFile != "" {
		if _, err := c.password(); err != nil {
			return err
		}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("nats: the client certificate and its key go together: set both or neither")
	}
	if c.DefaultRegisterInterval < 0 {
		return fmt.Errorf("nats: default register interval %s is negative", c.DefaultRegisterInterval)
	}
	if c.DefaultRegisterInterval != 0 && c.DefaultRegisterInterval < MinRegisterInterval {
		return fmt.Errorf("nats: default register interval %s is below the floor of %s", c.DefaultRegisterInterval, MinRegisterInterval)
	}
	if host, ok := c.plaintextCredentials(urls); ok && !c.AllowPlaintextPassword {
		return fmt.Errorf("%w to %s: use tls:// (or a CA file), a loopback server, or opt in", ErrPlaintextPassword, host)
	}
	if c.CAFile != "" {
		if _, err := c.rootCAs(); err != nil {
			return err
		}
	}
	if c.CertFile != "" {
		if _, err := c.clientCert(); err != nil {
			return err
		}
	}
	return nil
}

// secure tells whether the connection to urls is TLS: nats.go uses TLS for every server once
// it is configured, or once any URL is tls://.
func (c Config) secure(urls []*url.URL) bool {
	if c.CAFile != "" || c.CertFile != "" {
		return true
	}
	return slices.ContainsFunc(urls, func(u *url.URL) bool { return u.Scheme == "tls" })
}

// plaintextCredentials is the first server (host only) that a password or token would reach in
// the clear off loopback; false when there is none.
func (c Config) plaintextCredentials(urls []*url.URL) (string, bool) {
	if c.secure(urls) {
		return "", false
	}
	for _, u := range urls {
		// A URL's user alone is a token to nats.go: as secret as a password.
		if (c.Password == "" && c.PasswordFile == "" && u.User == nil) || loopback(u.Hostname()) {
			continue
		}
		return u.Hostname(), true
	}
	return "", false
}

// loopback tells whether host only reaches this machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// RedactedURLs are the server URLs without their user and password, for logs.
func (c Config) RedactedURLs() []string {
	urls, _ := c.servers()
	out := make([]string, 0, len(urls))
	for _, u := range urls {
		out = append(out, withoutUser(u))
	}
	return out
}

func withoutUser(u *url.URL) string {
	bare := *u
	bare.User = nil
	return bare.String()
}

// servers parses every URL.
func (c Config) servers() ([]*url.URL, error) {
	var out []*url.URL
	for _, element := range c.URLs {
		for raw := range strings.SplitSeq(element, ",") {
			raw = strings.TrimSpace(raw)
			if raw == "" {
				continue
			}
			u, err := url.Parse(raw)
			if err != nil {
				// url.Error repeats the URL, password included: say only where it failed.
				return nil, fmt.Errorf("nats: a server URL does not parse (%d characters)", len(raw))
			}
			if u.Scheme != "nats" && u.Scheme != "tls" {
				return nil, fmt.Errorf("nats: server URL %s: the scheme must be nats:// or tls://", withoutUser(u))
			}
			if u.Hostname() == "" || u.Port() == "" {
				return nil, fmt.Errorf("nats: server URL %s: host and port are required", withoutUser(u))
			}
			if (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
				return nil, fmt.Errorf("nats: server URL %s: a path or query means nothing to NATS", withoutUser(u))
			}
			out = append(out, u)
		}
	}
	return out, nil
}

func (c Config) password() (string, error) {
	if c.PasswordFile == "" {
		return c.Password, nil
	}
	b, err := os.ReadFile(c.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("nats: read password file: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

func (c Config) rootCAs() (*x509.CertPool, error) {
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("nats: read ca file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("nats: ca file %s holds no PEM certificate", c.CAFile)
	}
	return pool, nil
}

func (c Config) clientCert() (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("nats: load client certificate: %w", err)
	}
	return &cert, nil
}

func (c Config) registerInterval() time.Duration {
	if c.DefaultRegisterInterval == 0 {
		return DefaultRegisterInterval
	}
	return max(c.DefaultRegisterInterval, MinRegisterInterval)
}

// connection is what Connect needs, made once from a valid Config: the URL list, and the
// options except the handlers.
type connection struct {
	servers string
	options []nats.Option
}

func (c Config) connection(logger lager.Logger) (connection, error) {
	if err := c.Validate(); err != nil {
		return connection{}, err
	}
	urls, _ := c.servers()
	list := make([]string, 0, len(urls))
	for _, u := range urls {
		list = append(list, u.String())
	}
	secure := c.secure(urls)
	password, err := c.password()
	if err != nil {
		return connection{}, err
	}
	options := []nats.Option{
		nats.Name(connectionName),
		nats.Timeout(connectTimeout),
		// Messages are handed to NATS under the Emitter's lock: a NATS server that stops reading
		// holds Set, Delete and Replace at most this long (nats.go's default is a minute) before
		// the connection is dropped and made again.
		nats.FlusherTimeout(flushTimeout),
		// Forever, from the first attempt on: NATS being down at start is no reason not to start.
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.CustomReconnectDelay(reconnectDelay),
		// A refused password stays refused only until the operator or BOSH fixes it: keep trying.
		nats.IgnoreAuthErrorAbort(),
		// No buffering while disconnected: a register that cannot be sent is sent again from the
		// table on reconnect anyway, and an unregister that cannot be sent is kept by the
		// Emitter, which sends it first. Buffered copies would only be sent twice.
		nats.ReconnectBufSize(-1),
	}
	if c.User != "" || password != "" {
		options = append(options, nats.UserInfo(c.User, password))
	}
	if secure {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.CAFile != "" {
			if cfg.RootCAs, err = c.rootCAs(); err != nil {
				return connection{}, err
			}
		}
		if c.CertFile != "" {
			pair, err := tlsfiles.New([]string{c.CertFile, c.KeyFile}, c.clientCert, logger)
			if err != nil {
				return connection{}, err
			}
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return pair.Get(), nil }
		}
		options = append(options, nats.Secure(cfg))
	}
	return connection{servers: strings.Join(list, ","), options: options}, nil
}

// reconnectDelay is the wait after the attempts-th round over every server failed.
func reconnectDelay(attempts int) time.Duration {
	delay := firstReconnectDelay
	for i := 1; i < attempts && delay < maxReconnectDelay; i++ {
		delay *= 2
	}
	delay = min(delay, maxReconnectDelay)
	return delay + rand.N(delay/2+1)
}
