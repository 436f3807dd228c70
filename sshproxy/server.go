// Package sshproxy is `opi ssh-proxy`: the SSH endpoint `cf ssh` reaches. It authenticates a
// user as Diego's ssh-proxy does (a UAA one-time code exchanged for the user's token, then Cloud
// Controller's ssh_access answer naming the process) and enters the instance opi reports at that
// index through the Kubernetes API's pods/exec, so no sshd or key lives in the app's image.
package sshproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"strings"
	"sync"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"
	"code.cloudfoundry.org/lager/v3"
	"golang.org/x/crypto/ssh"

	"github.com/opi-bridge/opi/k8s/instances"
	"github.com/opi-bridge/opi/loggregator"
	"github.com/opi-bridge/opi/opi"
)

//go:generate go tool counterfeiter -generate

// Instances are the LRPs' instances as opi reports them (k8s/instances' Reader).
//
//counterfeiter:generate . Instances
type Instances interface {
	// Instance is the pod `GET /instances` reports at that index of the LRP.
	Instance(id opi.LRPIdentifier, index int32) (*instances.Pod, *instances.Workload, bool)
	// Pod is the LRP pod of that name.
	Pod(name string) (*instances.Pod, bool)
}

// Emitter sends log envelopes to Loggregator (package loggregator's Sender).
//
//counterfeiter:generate . Emitter
type Emitter interface {
	Emit(env *loggregator_v2.Envelope, ack func()) bool
}

// LinesSourceType is the source type of the lines a session puts into the app's log stream,
// as Diego's ssh-proxy does.
const LinesSourceType = "SSH"

// Options are the proxy's settings.
type Options struct {
	// HostKey is the proxy's host key.
	HostKey ssh.Signer
	// Auth is how users are checked.
	Auth AuthConfig
	// MaxSessions bounds the proxy's authenticated connections, and apart from them the
	// connections still authenticating (at least minHandshakes of those).
	MaxSessions int
	// MaxSessionsPerUser bounds one user's authenticated connections.
	MaxSessionsPerUser int
	// IdleTimeout closes a connection that carried no byte for that long.
	IdleTimeout time.Duration
	// AuthTimeout closes a connection not authenticated within it.
	AuthTimeout time.Duration
	// InstanceCheckPeriod is how often a session checks that its pod is still a live instance
	// (default DefaultInstanceCheckPeriod).
	InstanceCheckPeriod time.Duration
	// SFTPServerPaths are where the sftp subsystem looks for the image's sftp-server, the
	// first that is an executable serving (default DefaultSFTPServerPaths).
	SFTPServerPaths []string
	// InputEndGrace is how long a file transfer's command may run on after the client ended
	// its input before the proxy ends it (default DefaultInputEndGrace).
	InputEndGrace time.Duration
}

// Defaults of the bounds.
const (
	DefaultMaxSessions         = 1000
	DefaultMaxSessionsPerUser  = 20
	DefaultIdleTimeout         = 30 * time.Minute
	DefaultAuthTimeout         = 10 * time.Second
	DefaultInstanceCheckPeriod = 2 * time.Second
	DefaultInputEndGrace       = 2 * time.Second
)

// minHandshakes is the least number of connections that may authenticate at once, so a
// small session bound does not turn away a client that follows a closing one.
const minHandshakes = 16

// maxChannelsPerConn bounds the sessions (execs) one connection runs at once, as sshd's
// MaxSessions does.
const maxChannelsPerConn = 10

// maxTunnelsPerConn bounds the tunnels (port-forwards and relayed dials) one connection carries
// at once.
const maxTunnelsPerConn = 32

// Validate reports every setting the proxy cannot run with.
func (o Options) Validate() error {
	var errs []error
	if o.HostKey == nil {
		errs = append(errs, errors.New("a host key is required"))
	}
	if o.MaxSessions < 1 || o.MaxSessionsPerUser < 1 {
		errs = append(errs, fmt.Errorf("max-sessions (%d) and max-sessions-per-user (%d) must be at least 1", o.MaxSessions, o.MaxSessionsPerUser))
	}
	if o.IdleTimeout <= 0 || o.AuthTimeout <= 0 {
		errs = append(errs, fmt.Errorf("idle-timeout (%s) and auth-timeout (%s) must be positive", o.IdleTimeout, o.AuthTimeout))
	}
	for _, p := range o.SFTPServerPaths {
		if !path.IsAbs(p) || strings.ContainsAny(p, "\x00\n") {
			errs = append(errs, fmt.Errorf("sftp-server path %q is not an absolute path", p))
		}
	}
	return errors.Join(append(errs, o.Auth.Validate())...)
}

// Deps are the proxy's clients.
type Deps struct {
	Instances Instances
	Executor  Executor
	// Forwarder carries the tunnels (direct-tcpip channels) to the instance's own ports; nil:
	// tunnels are refused.
	Forwarder Forwarder
	// Relay carries the tunnels to other hosts from inside the instance's pod; nil: they are
	// refused.
	Relay Relay
	// Lines, when set, receives the lines saying in the app's log stream who came in and when
	// they left (cf logs shows them); nil: no lines.
	Lines  Emitter
	Logger lager.Logger
}

// Server accepts SSH connections and runs their sessions in the instances.
type Server struct {
	o      Options
	d      Deps
	auth   *authenticator
	prints Fingerprints
	// handshakes holds a token per connection still authenticating.
	handshakes chan struct{}

	mu       sync.Mutex
	sessions int
	perUser  map[string]int
}

// New builds a Server; it refuses options it cannot run with.
func New(o Options, d Deps) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.InstanceCheckPeriod <= 0 {
		o.InstanceCheckPeriod = DefaultInstanceCheckPeriod
	}
	if len(o.SFTPServerPaths) == 0 {
		o.SFTPServerPaths = DefaultSFTPServerPaths
	}
	if o.InputEndGrace <= 0 {
		o.InputEndGrace = DefaultInputEndGrace
	}
	auth, err := newAuthenticator(o.Auth)
	if err != nil {
		return nil, err
	}
	return &Server{
		o: o, d: d, auth: auth,
		prints:     FingerprintsOf(o.HostKey.PublicKey()),
		handshakes: make(chan struct{}, max(o.MaxSessions, minHandshakes)),
		perUser:    map[string]int{},
	}, nil
}

// Fingerprints are the host key's.
func (s *Server) Fingerprints() Fingerprints { return s.prints }

// Serve accepts connections on l until ctx ends, then closes l and every connection and
// waits for their sessions to end.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { <-ctx.Done(); l.Close() }()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		conn, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("accepting connections: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.handle(ctx, conn)
		}()
	}
}

// grant is what a connection's authentication decided: the access CC gave and the pod.
type grant struct {
	access
	pod podRef
	// lines is who the session's log lines are about.
	lines loggregator.Identity
}

// podRef names the pod a connection's sessions enter.
type podRef struct{ name, uid string }

// handle runs one connection: its handshake within AuthTimeout (bounded in number), then its
// session channels in the pod the user was granted.
func (s *Server) handle(ctx context.Context, raw net.Conn) {
	defer raw.Close()
	// The proxy stopping ends every connection, and so their sessions.
	defer context.AfterFunc(ctx, func() { raw.Close() })()
	conn := newActivityConn(raw)
	remote := conn.RemoteAddr().String()
	select {
	case s.handshakes <- struct{}{}:
	default:
		s.d.Logger.Info("connection-refused", lager.Data{"remote": remote, "reason": "too many connections authenticating"})
		return
	}
	handshakeDone := sync.OnceFunc(func() { <-s.handshakes })
	defer handshakeDone()
	_ = conn.SetDeadline(time.Now().Add(s.o.AuthTimeout))

	var granted *grant
	config := &ssh.ServerConfig{
		MaxAuthTries: 3,
		PasswordCallback: func(meta ssh.ConnMetadata, code []byte) (*ssh.Permissions, error) {
			if granted != nil {
				return nil, errors.New("already authenticated")
			}
			g, err := s.authorize(ctx, meta.User(), code)
			if err != nil {
				s.d.Logger.Info("authentication-refused", lager.Data{"remote": remote, "user": truncate(meta.User(), 120), "reason": err.Error()})
				return nil, &ssh.BannerError{Err: err, Message: "opi ssh-proxy: " + err.Error() + "\r\n"}
			}
			granted = g
			return &ssh.Permissions{}, nil
		},
	}
	config.AddHostKey(s.o.HostKey)
	sshConn, chans, reqs, err := ssh.NewServerConn(conn, config)
	if granted != nil {
		defer s.release(granted.owner)
	}
	handshakeDone()
	if err != nil {
		s.d.Logger.Debug("handshake-failed", lager.Data{"remote": remote, "error": err.Error()})
		return
	}
	defer sshConn.Close()
	_ = conn.SetDeadline(time.Time{})
	defer conn.closeWhenIdle(s.o.IdleTimeout)()

	logger := s.d.Logger.Session("ssh-session", lager.Data{
		"remote": remote, "process-guid": granted.lrp.ProcessGUID(), "index": granted.index, "pod": granted.pod.name,
	})
	logger.Info("started")
	defer logger.Info("ended")
	s.line(granted, "Successful remote access by "+remote)
	defer s.line(granted, "Remote access ended for "+remote)
	go ssh.DiscardRequests(reqs)

	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, maxChannelsPerConn)
	tunnels := make(chan struct{}, maxTunnelsPerConn)
	for newCh := range chans {
		switch newCh.ChannelType() {
		case "session":
		case "direct-tcpip":
			select {
			case tunnels <- struct{}{}:
			default:
				_ = newCh.Reject(ssh.ResourceShortage, fmt.Sprintf("at most %d tunnels per connection", maxTunnelsPerConn))
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-tunnels }()
				s.tunnel(ctx, granted, newCh, logger)
			}()
			continue
		default:
			_ = newCh.Reject(ssh.UnknownChannelType, "opi ssh-proxy serves session and direct-tcpip channels only")
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			_ = newCh.Reject(ssh.ResourceShortage, fmt.Sprintf("at most %d sessions per connection", maxChannelsPerConn))
			continue
		}
		ch, chReqs, err := newCh.Accept()
		if err != nil {
			<-slots
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			newSession(s, granted, ch, logger).serve(ctx, chReqs)
		}()
	}
}

// authorize checks the user (UAA, then CC), then finds the instance, RUNNING, and takes a
// session of the bounds; any failure is a refusal and makes no Kubernetes call.
func (s *Server) authorize(ctx context.Context, user string, code []byte) (*grant, error) {
	acc, err := s.auth.authenticate(ctx, user, code)
	if err != nil {
		return nil, err
	}
	pod, w, ok := s.d.Instances.Instance(acc.lrp, acc.index)
	if !ok {
		return nil, refuse("instance %d does not exist", acc.index)
	}
	if pod.State != opi.InstanceRunning || pod.DeletionTimestamp != nil {
		return nil, refuse("instance %d is not running (%s)", acc.index, pod.State)
	}
	if err := s.reserve(acc.owner); err != nil {
		return nil, err
	}
	return &grant{
		access: acc, pod: podRef{name: pod.Name, uid: string(pod.UID)},
		lines: instances.LogIdentity(w, pod, acc.index, LinesSourceType),
	}, nil
}

// reserve takes a session of the proxy's and the user's bounds.
func (s *Server) reserve(owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions >= s.o.MaxSessions {
		return refuse("the proxy is at its bound of %d sessions; try again later", s.o.MaxSessions)
	}
	if s.perUser[owner] >= s.o.MaxSessionsPerUser {
		return refuse("you have %d sessions open, the most one user may have", s.o.MaxSessionsPerUser)
	}
	s.sessions++
	s.perUser[owner]++
	return nil
}

func (s *Server) release(owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sessions--
	if s.perUser[owner]--; s.perUser[owner] <= 0 {
		delete(s.perUser, owner)
	}
}

// line puts a line into the app's log stream, when the proxy sends lines.
func (s *Server) line(g *grant, text string) {
	if s.d.Lines == nil {
		return
	}
	s.d.Lines.Emit(loggregator.NewLog(g.lines, time.Now(), loggregator_v2.Log_OUT, []byte(text)), nil)
}
