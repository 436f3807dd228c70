package sshproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/opi-bridge/opi/cc"
	"github.com/opi-bridge/opi/opi"
)

// AuthConfig is how the proxy checks a user: UAA exchanges the one-time code for the user's
// token, and Cloud Controller says whether that user may reach the instance.
type AuthConfig struct {
	// UAATokenURL is UAA's token endpoint, e.g. https://uaa.example.com/oauth/token.
	UAATokenURL string
	// UAAClientID and UAAClientSecret are the proxy's UAA client (CC's app_ssh.oauth_client_id
	// issues the codes for it).
	UAAClientID, UAAClientSecret string
	// UAACA and CCCA are CA files (PEM) for UAA's and CC's server certificates; empty: the
	// system's roots.
	UAACA, CCCA string
	// CCAPIURL is where CC serves /internal/apps/<guid>/ssh_access/<index>.
	CCAPIURL string
	// AllowPlainHTTP allows http:// URLs off loopback (a foundation's CC internal port).
	AllowPlainHTTP bool
	// Timeout bounds each call to UAA and CC. Default DefaultAuthCallTimeout.
	Timeout time.Duration
}

// DefaultAuthCallTimeout bounds each call to UAA and CC.
const DefaultAuthCallTimeout = 10 * time.Second

// maxAnswerBytes bounds what is read of UAA's and CC's answers.
const maxAnswerBytes = 64 << 10

// Validate checks the URLs: https, or plain http on loopback or with AllowPlainHTTP.
func (c AuthConfig) Validate() error {
	var errs []error
	for _, u := range []struct{ name, value string }{{"uaa-token-url", c.UAATokenURL}, {"cc-api-url", c.CCAPIURL}} {
		if err := c.checkURL(u.value); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", u.name, err))
		}
	}
	if c.UAAClientID == "" || c.UAAClientSecret == "" {
		errs = append(errs, errors.New("the UAA client id and secret are required"))
	}
	return errors.Join(errs...)
}

func (c AuthConfig) checkURL(raw string) error {
	if raw == "" {
		return errors.New("is required")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a URL", raw)
	}
	switch {
	case u.Host == "":
		return fmt.Errorf("%q has no host", raw)
	case u.User != nil:
		return fmt.Errorf("%q must not hold credentials", u.Redacted())
	case u.Scheme == "https":
		return nil
	case u.Scheme != "http":
		return fmt.Errorf("%q must be https:// (or http://)", raw)
	case c.AllowPlainHTTP || cc.IsLoopback(u.Hostname()):
		return nil
	default:
		return fmt.Errorf("refusing plain http to %s: the user's token would cross the network in the clear; use https, or opt in with --allow-plain-http", u.Host)
	}
}

// refusal is an attempt the proxy turns down: its message is shown to the user and logged, so
// it never holds the code, the token or the client secret.
type refusal struct{ message string }

func (r *refusal) Error() string { return r.message }

func refuse(format string, args ...any) error { return &refusal{fmt.Sprintf(format, args...)} }

// access is what Cloud Controller granted: an instance of an LRP, to a user.
type access struct {
	lrp   opi.LRPIdentifier
	index int32
	// owner names the user for the per-user bound: the token's user_id, else the SSH user name.
	owner string
}

// authenticator checks users as Diego's ssh-proxy does.
type authenticator struct {
	cfg     AuthConfig
	uaa, cc *http.Client
}

func newAuthenticator(cfg AuthConfig) (*authenticator, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultAuthCallTimeout
	}
	uaa, err := httpClient(cfg.UAACA, cfg.Timeout)
	if err != nil {
		return nil, fmt.Errorf("uaa-ca: %w", err)
	}
	cc, err := httpClient(cfg.CCCA, cfg.Timeout)
	if err != nil {
		return nil, fmt.Errorf("cc-ca: %w", err)
	}
	return &authenticator{cfg: cfg, uaa: uaa, cc: cc}, nil
}

// httpClient trusts caFile's certificates (the system's without one) and follows no redirect:
// the user's token goes only where it was configured to.
func httpClient(caFile string, timeout time.Duration) (*http.Client, error) {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.Proxy = nil
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("reading the CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{
		Transport:     transport,
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// guidPattern is a process guid or version as opi labels them.
var guidPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// maxIndex bounds the index a user may name (CC's instances are far fewer).
const maxIndex = 1 << 20

// parseUser reads the cf CLI's user name, cf:<process guid>/<index>.
func parseUser(user string) (guid string, index int32, err error) {
	rest, ok := strings.CutPrefix(user, "cf:")
	guid, idx, found := strings.Cut(rest, "/")
	n, convErr := strconv.Atoi(idx)
	if !ok || !found || !guidPattern.MatchString(guid) || convErr != nil || n < 0 || n > maxIndex || strconv.Itoa(n) != idx {
		return "", 0, refuse("invalid user name %q: expected cf:<process guid>/<index>", truncate(user, 120))
	}
	return guid, int32(n), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// authenticate checks the user name and the one-time code: UAA exchanges the code for the
// user's token, and CC answers with the LRP of the process guid if that user may reach the
// instance. Any other outcome is a refusal.
func (a *authenticator) authenticate(ctx context.Context, user string, code []byte) (access, error) {
	guid, index, err := parseUser(user)
	if err != nil {
		return access{}, err
	}
	if len(code) == 0 {
		return access{}, refuse("authentication failed: no one-time code given (cf ssh-code makes one)")
	}
	token, err := a.exchange(ctx, string(code))
	if err != nil {
		return access{}, err
	}
	id, err := a.sshAccess(ctx, token, guid, index)
	if err != nil {
		return access{}, err
	}
	owner := tokenUser(token)
	if owner == "" {
		owner = user
	}
	return access{lrp: id, index: index, owner: owner}, nil
}

// exchange trades the one-time code for the user's access token at UAA.
func (a *authenticator) exchange(ctx context.Context, code string) (string, error) {
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.UAATokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("making the UAA request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(a.cfg.UAAClientID, a.cfg.UAAClientSecret)
	resp, err := a.uaa.Do(req)
	if err != nil {
		return "", refuse("authentication failed: UAA could not be reached")
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return "", refuse("authentication failed: UAA's answer could not be read")
	}
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode >= 500 {
			return "", refuse("authentication failed: UAA answered %d", resp.StatusCode)
		}
		return "", refuse("authentication failed: UAA did not accept the one-time code (cf ssh-code makes a new one)")
	}
	var answer struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(body, &answer); err != nil || answer.AccessToken == "" {
		return "", refuse("authentication failed: UAA's answer holds no access token")
	}
	return answer.AccessToken, nil
}

// sshAccess asks CC whether the token's user may reach the instance; CC answers 200 with the
// LRP's process guid (<guid>-<version>) only then.
func (a *authenticator) sshAccess(ctx context.Context, token, guid string, index int32) (opi.LRPIdentifier, error) {
	u := strings.TrimSuffix(a.cfg.CCAPIURL, "/") + "/internal/apps/" + url.PathEscape(guid) + "/ssh_access/" + strconv.Itoa(int(index))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return opi.LRPIdentifier{}, fmt.Errorf("making the Cloud Controller request: %w", err)
	}
	req.Header.Set("Authorization", "bearer "+token)
	req.Header.Set("Accept", "application/json")
	resp, err := a.cc.Do(req)
	if err != nil {
		return opi.LRPIdentifier{}, refuse("access denied: Cloud Controller could not be reached")
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return opi.LRPIdentifier{}, refuse("access denied: Cloud Controller's answer could not be read")
	}
	if resp.StatusCode != http.StatusOK {
		return opi.LRPIdentifier{}, refuse("access denied: Cloud Controller refused SSH to instance %d of process %s (%d)", index, guid, resp.StatusCode)
	}
	var answer struct {
		ProcessGUID string `json:"process_guid"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return opi.LRPIdentifier{}, refuse("access denied: Cloud Controller's answer is not JSON")
	}
	// The version is what CC appended to the guid the user named; an answer for another
	// process is no grant for this one.
	version, ok := strings.CutPrefix(answer.ProcessGUID, guid+"-")
	if !ok || !guidPattern.MatchString(version) {
		return opi.LRPIdentifier{}, refuse("access denied: Cloud Controller's answer names another process")
	}
	return opi.LRPIdentifier{GUID: guid, Version: version}, nil
}

// tokenUser is the user_id claim of a UAA token (a JWT), "" when there is none. The token is
// not verified here (CC did that): the claim only keys the per-user bound.
func tokenUser(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims struct {
		UserID string `json:"user_id"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return ""
	}
	return claims.UserID
}
