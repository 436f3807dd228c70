// Package sshstandin stands in for the two services `opi ssh-proxy` asks before it lets a user
// in, UAA's token endpoint and Cloud Controller's ssh_access endpoint (plain HTTP on loopback),
// and connects to a proxy as the cf CLI does (and runs commands through it). The proxy's specs and
// the integration suite use it.
package sshstandin

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// Options are the stand-ins' one UAA client, one valid code and CC's grant.
type Options struct {
	// ClientID and ClientSecret are the only UAA client accepted.
	ClientID, ClientSecret string
	// Code is the only one-time code UAA exchanges; its token is of UserID.
	Code, UserID string
	// ProcessGUID is CC's answer to a granted ssh_access: "<guid>-<version>".
	ProcessGUID string
	// Grants, when set, are CC's answers by the process guid the user names (the path's
	// guid): "<guid>-<version>" for a granted one; any other is unknown to CC (404), as an app
	// CC does not have. ProcessGUID is then not used.
	Grants map[string]string
}

// Server is the two stand-ins.
type Server struct {
	o       Options
	uaa, cc *httptest.Server
	token   string

	mu                sync.Mutex
	ccStatus          int
	ccBody            string
	ccAnswerSet       bool
	uaaCalls, ccCalls []string
}

// Start starts both stand-ins; CC grants every request carrying the user's token.
func Start(o Options) *Server {
	s := &Server{o: o, ccStatus: http.StatusOK, ccBody: fmt.Sprintf(`{"process_guid":%q}`, o.ProcessGUID)}
	claims := fmt.Sprintf(`{"user_id":%q}`, o.UserID)
	s.token = "eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".signature"
	s.uaa = httptest.NewServer(http.HandlerFunc(s.serveToken))
	s.cc = httptest.NewServer(http.HandlerFunc(s.serveSSHAccess))
	return s
}

// TokenURL is UAA's token endpoint.
func (s *Server) TokenURL() string { return s.uaa.URL + "/oauth/token" }

// CCURL is CC's base URL.
func (s *Server) CCURL() string { return s.cc.URL }

// Token is the access token UAA gives for the code.
func (s *Server) Token() string { return s.token }

// SetCCAnswer makes CC answer every request with the user's token so.
func (s *Server) SetCCAnswer(status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ccStatus, s.ccBody, s.ccAnswerSet = status, body, true
}

// UAACalls are the token requests so far: "METHOD path client:secret form".
func (s *Server) UAACalls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.uaaCalls...)
}

// CCCalls are the ssh_access requests so far: "METHOD path Authorization".
func (s *Server) CCCalls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ccCalls...)
}

// Close stops both.
func (s *Server) Close() {
	s.uaa.Close()
	s.cc.Close()
}

func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	id, secret, _ := r.BasicAuth()
	_ = r.ParseForm()
	s.mu.Lock()
	s.uaaCalls = append(s.uaaCalls, fmt.Sprintf("%s %s %s:%s %s", r.Method, r.URL.Path, id, secret, r.PostForm.Encode()))
	s.mu.Unlock()
	if r.Method != http.MethodPost || id != s.o.ClientID || secret != s.o.ClientSecret ||
		r.PostForm.Get("grant_type") != "authorization_code" || r.PostForm.Get("code") != s.o.Code {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"invalid_grant"}`)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"access_token": s.token, "token_type": "bearer"})
}

func (s *Server) serveSSHAccess(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.ccCalls = append(s.ccCalls, fmt.Sprintf("%s %s %s", r.Method, r.URL.Path, r.Header.Get("Authorization")))
	status, body := s.ccStatus, s.ccBody
	if s.o.Grants != nil && !s.ccAnswerSet {
		status, body = s.grant(r.URL.Path)
	}
	s.mu.Unlock()
	if r.Header.Get("Authorization") != "bearer "+s.token {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

// grant is CC's answer from Grants to the ssh_access path: the process guid named in it, or
// CC's error for an app it does not know.
func (s *Server) grant(path string) (int, string) {
	guid, _, _ := strings.Cut(strings.TrimPrefix(path, "/internal/apps/"), "/ssh_access/")
	if pg, ok := s.o.Grants[guid]; ok {
		return http.StatusOK, fmt.Sprintf(`{"process_guid":%q}`, pg)
	}
	return http.StatusNotFound, `{"code":100004,"description":"The app could not be found","error_code":"CF-AppNotFound"}`
}

// User is the cf CLI's SSH user name for an instance of a process.
func User(processGUID string, index int) string { return fmt.Sprintf("cf:%s/%d", processGUID, index) }

// Dial connects to a proxy at addr as the cf CLI does: user, the one-time code as password, the
// host key checked against the MD5 fingerprint CC advertises (colon hex). banner, when not nil,
// receives what the proxy says before it refuses.
func Dial(addr, user, code, md5Fingerprint string, banner io.Writer) (*ssh.Client, error) {
	config := &ssh.ClientConfig{
		User: user,
		Auth: []ssh.AuthMethod{ssh.Password(code)},
		HostKeyCallback: func(_ string, _ net.Addr, key ssh.PublicKey) error {
			sum := md5.Sum(key.Marshal())
			parts := make([]string, len(sum))
			for i, b := range sum {
				parts[i] = fmt.Sprintf("%02x", b)
			}
			if strings.Join(parts, ":") != md5Fingerprint {
				return errors.New("host key fingerprint mismatch")
			}
			return nil
		},
		BannerCallback: func(message string) error {
			if banner != nil {
				_, _ = io.WriteString(banner, message)
			}
			return nil
		},
		Timeout: 10 * time.Second,
	}
	return ssh.Dial("tcp", addr, config)
}

// Run runs command in a new session of client, as `cf ssh -c` does, with stdin as its input
// (nil: none), and returns what it wrote on stdout and stderr, apart, and how it ended (an
// *ssh.ExitError for a non-zero exit status).
func Run(client *ssh.Client, command string, stdin io.Reader) (stdout, stderr string, err error) {
	session, err := client.NewSession()
	if err != nil {
		return "", "", fmt.Errorf("opening a session: %w", err)
	}
	defer session.Close()
	var out, errOut bytes.Buffer
	session.Stdout, session.Stderr, session.Stdin = &out, &errOut, stdin
	err = session.Run(command)
	return out.String(), errOut.String(), err
}
