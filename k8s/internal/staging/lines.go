package staging

import (
	"strconv"
	"strings"
	"time"

	"code.cloudfoundry.org/go-loggregator/v10/rpc/loggregator_v2"

	"github.com/opi-bridge/opi/loggregator"
	"github.com/opi-bridge/opi/opi"
)

// The STG lines: what a docker staging read and what came of it, sent to the app's log stream
// (source_id the app guid, source_type STG, instance_id 0) as Diego's stager sends its output,
// when the service has an Emitter (Deps.Lines). They name the image reference only (never the
// registry's user or password) and, for a failure, the very reason CC is given.

//go:generate go tool counterfeiter -generate
//counterfeiter:generate . Emitter

// Emitter takes envelopes for delivery without blocking (package loggregator's *Sender).
type Emitter interface {
	Emit(env *loggregator_v2.Envelope, ack func()) bool
}

// LinesSourceType is the source_type of the staging lines.
const LinesSourceType = "STG"

// line sends one STG line of a staging of app (nothing without an emitter or an app guid).
func (s *Service) line(app, text string) {
	if s.lines == nil || app == "" {
		return
	}
	id := loggregator.Identity{SourceID: app, InstanceID: "0", Tags: loggregator.AppTags{SourceType: LinesSourceType, AppID: app}.Map()}
	s.lines.Emit(loggregator.NewLog(id, time.Now(), loggregator_v2.Log_OUT, []byte(text)), nil)
}

// readingLine is the line sent before an image's configuration is read.
func readingLine(image string, private bool) string {
	line := "Reading the configuration of image " + imageReference(image)
	if private {
		line += " with the registry credentials given"
	}
	return line
}

// resultLine is the line of a staging's outcome: what was staged, or the reason CC is given.
func resultLine(c opi.StagingCompletion) string {
	if c.Failed() {
		return "Staging failed: " + c.FailureReason
	}
	cfg := c.Config
	var b strings.Builder
	b.WriteString("Staging complete: image " + imageReference(c.Image) + ", process types: web")
	if len(cfg.Ports) == 0 {
		b.WriteString(", ports: none exposed")
	} else {
		ports := make([]string, len(cfg.Ports))
		for i, p := range cfg.Ports {
			ports[i] = strconv.Itoa(int(p.Port)) + "/" + p.Protocol
		}
		b.WriteString(", ports: " + strings.Join(ports, " "))
	}
	if cfg.User != "" {
		b.WriteString(", user: " + cfg.User)
	} else {
		b.WriteString(", user: the image's default")
	}
	if cmd := append(append([]string(nil), cfg.Entrypoint...), cfg.Cmd...); len(cmd) > 0 {
		b.WriteString(", command: " + strings.Join(cmd, " "))
	}
	return b.String()
}

// imageReference is an image reference without anything that looks like credentials: a
// user[:password]@ before the registry host (no valid reference has one, but CC passes what
// the developer typed) is left out, as is a URL scheme.
func imageReference(image string) string {
	if i := strings.Index(image, "://"); i >= 0 {
		image = image[i+3:]
	}
	host, rest, hasPath := strings.Cut(image, "/")
	if at := strings.LastIndex(host, "@"); at >= 0 {
		host = host[at+1:]
	}
	if hasPath {
		return host + "/" + rest
	}
	return host
}
