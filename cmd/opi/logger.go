package main

import (
	"fmt"
	"io"

	"code.cloudfoundry.org/lager/v3"
)

// redactedKeys name lager.Data keys whose values never reach a log line, whatever they hold:
// opi's code keeps env and credentials out of its log data, and this sink is the second guard
// should a change ever log a request, an env map or an error wrapping them. Key names that
// operators search by (secret, deployment, service: object names) are left alone.
var redactedKeys = []string{
	`(?i)pass`, `(?i)pwd`, `(?i)token`, `(?i)credential`, `(?i)private[-_]?key`, `(?i)authorization`,
	`(?i)^env(ironment)?$`, `(?i)^vcap_services$`, `(?i)^database_url$`,
}

// redactedValues match values that are credentials wherever they appear: lager's defaults (AWS
// keys, password hashes, PEM private keys), plus JSON (however deeply encoded, as
// VCAP_SERVICES is in an env map) with a password or credentials key, and URLs with a user and
// password.
var redactedValues = append(lager.DefaultValuePatterns(),
	`(?i)(password|passwd|credentials)\\*"\s*:`,
	`[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:[^/\s@]+@`,
)

// newLogger logs at level and above to w, one JSON object a line with RFC 3339 timestamps
// (lager's pretty format, which CF operators' log tooling reads), through a redacting sink.
func newLogger(w io.Writer, level string) (lager.Logger, error) {
	minLevel, err := lager.LogLevelFromString(level)
	if err != nil {
		return nil, fmt.Errorf("log level: %w", err)
	}
	sink, err := lager.NewRedactingSink(lager.NewPrettySink(w, minLevel), redactedKeys, redactedValues)
	if err != nil {
		return nil, fmt.Errorf("redacting log sink: %w", err)
	}
	logger := lager.NewLogger("opi")
	logger.RegisterSink(sink)
	return logger, nil
}
