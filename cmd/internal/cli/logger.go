// Package cli holds what opi's commands share: their logger, their Kubernetes configuration and
// how a subcommand runs.
package cli

import (
	"fmt"
	"io"
	"regexp"

	"code.cloudfoundry.org/lager/v3"
)

// redactedKeys name lager.Data keys whose values never reach a log line, whatever they hold:
// opi's code keeps env and credentials out of its log data, and this sink is the second guard
// should a change ever log a request, an env map or an error wrapping them. Key names that
// operators search by (secret, deployment, service: object names) are left alone: "secret"
// alone is an object name, so only the compounds that are credentials are listed
// (client_secret, secret_key, access_key), and "pw" only as a word of its own (pw, db_pw, pw-hash).
var redactedKeys = []string{
	`(?i)pass`, `(?i)pwd`, `(?i)token`, `(?i)credential`, `(?i)private[-_]?key`, `(?i)authorization`,
	`(?i)^env(ironment)?$`, `(?i)^vcap_services$`, `(?i)^database_url$`,
	`(?i)api[-_]?key`, `(?i)(^|[-_.])pw($|[-_.])`, `(?i)client[-_]?secret`, `(?i)secret[-_]?key`, `(?i)access[-_]?key`,
}

// redactedValues match values that are credentials wherever they appear: lager's defaults (AWS
// keys, password hashes, PEM private keys), plus JSON (however deeply encoded, as
// VCAP_SERVICES is in an env map) with a password or credentials key, and URLs with a user and
// password.
var redactedValues = append(lager.DefaultValuePatterns(),
	`(?i)(password|passwd|credentials)\\*"\s*:`,
	`[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:[^/\s@]+@`,
	// HTTP credentials as an Authorization header carries them: "Basic <base64>", "Bearer <token>".
	// A Basic token has a digit, '+', '/' or '=' in it (base64 of user:password nearly always
	// does), which keeps plain words after "basic" ("basic authentication") in the log.
	`\b[Bb](?i:asic)\s+[A-Za-z0-9+/]*[0-9+/=][A-Za-z0-9+/=]*`,
	`(?i)\bbearer\s+[A-Za-z0-9._~+/-]{8,}=*`,
	// key=value and "key": "value" forms of the keys above inside a longer text.
	`(?i)(api[-_]?key|access[-_]?token|client[-_]?secret|password|passwd|\bpw)\\*"?\s*[:=]`,
)

// NewLogger logs at level and above to w, one JSON object a line with RFC 3339 timestamps
// (lager's pretty format, which CF operators' log tooling reads), through a redacting sink.
func NewLogger(w io.Writer, level string) (lager.Logger, error) {
	minLevel, err := lager.LogLevelFromString(level)
	if err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	sink, err := newRedactingSink(lager.NewPrettySink(w, minLevel))
	if err != nil {
		return nil, fmt.Errorf("redacting log sink: %w", err)
	}
	logger := lager.NewLogger("opi")
	logger.RegisterSink(sink)
	return logger, nil
}

// messageRedactingSink redacts the message text too: lager's redacting sink looks at Data only,
// and a message made with a value in it (a session named after a URL, say) would pass. From the
// first credential-looking match on, the message is replaced: its start (the component and
// sessions) stays for searching.
type messageRedactingSink struct {
	lager.Sink // lager's redacting sink, which redacts Data
	values     []*regexp.Regexp
}

// newRedactingSink wraps sink in lager's redacting sink (Data) and redacts messages as well.
func newRedactingSink(sink lager.Sink) (lager.Sink, error) {
	data, err := lager.NewRedactingSink(sink, redactedKeys, redactedValues)
	if err != nil {
		return nil, err
	}
	s := &messageRedactingSink{Sink: data}
	for _, pattern := range redactedValues {
		re, err := regexp.Compile(pattern)
		if err != nil {
			return nil, fmt.Errorf("value pattern %q: %w", pattern, err)
		}
		s.values = append(s.values, re)
	}
	return s, nil
}

// Log redacts the message, then hands the entry to lager's redacting sink.
func (s *messageRedactingSink) Log(entry lager.LogFormat) {
	first := -1
	for _, re := range s.values {
		if loc := re.FindStringIndex(entry.Message); loc != nil && (first < 0 || loc[0] < first) {
			first = loc[0]
		}
	}
	if first >= 0 {
		entry.Message = entry.Message[:first] + "*REDACTED*"
	}
	// The error's text is in Data["error"] (redacted there); the value itself is not written.
	entry.Error = nil
	s.Sink.Log(entry)
}
