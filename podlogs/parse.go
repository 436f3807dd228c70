package podlogs

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// Stream is the container stream a line was written to.
type Stream string

// The two streams of a CRI log line.
const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// Entry is one physical line of a CRI log file, parsed.
type Entry struct {
	Time   time.Time
	Stream Stream
	// Partial is true for a "P" line: its content continues in the next line of the stream.
	Partial bool
	// Content is the line's payload without the trailing newline. It aliases the input of
	// ParseLine.
	Content []byte
}

// ErrMalformed is wrapped by every ParseLine error.
var ErrMalformed = errors.New("malformed CRI log line")

// ParseLine parses one line of a CRI log file, `<RFC 3339 nano timestamp> <stdout|stderr> <P|F>
// <content>`, with or without its trailing newline. Anything else is an error wrapping
// ErrMalformed that says which field is wrong. Content aliases line; the line's length is
// bounded by the reader (the Follower cuts physical lines at its bound before parsing).
func ParseLine(line []byte) (Entry, error) {
	line = bytes.TrimSuffix(line, []byte("\n"))
	ts, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok {
		return Entry{}, fmt.Errorf("%w: no stream after the timestamp", ErrMalformed)
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return Entry{}, fmt.Errorf("%w: timestamp %q is not RFC 3339", ErrMalformed, clip(ts))
	}
	stream, rest, ok := bytes.Cut(rest, []byte(" "))
	if !ok {
		return Entry{}, fmt.Errorf("%w: no tag after the stream", ErrMalformed)
	}
	e := Entry{Time: t}
	switch string(stream) {
	case string(Stdout):
		e.Stream = Stdout
	case string(Stderr):
		e.Stream = Stderr
	default:
		return Entry{}, fmt.Errorf("%w: stream %q is neither stdout nor stderr", ErrMalformed, clip(stream))
	}
	// The content may be empty ("... F" with or without the separating space: an empty line).
	tag, content, _ := bytes.Cut(rest, []byte(" "))
	switch string(tag) {
	case "P":
		e.Partial = true
	case "F":
	default:
		return Entry{}, fmt.Errorf("%w: tag %q is neither P nor F", ErrMalformed, clip(tag))
	}
	e.Content = content
	return e, nil
}

// clip keeps error messages short when a field is garbage.
func clip(b []byte) string {
	const max = 40
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	return string(b)
}
