// Package kubeletlogs writes container log files as the kubelet does, for the suites and the
// local run of the node agent (under kwok no kubelet writes any): for one container of a pod,
// `<root>/<namespace>_<pod>_<uid>/<container>/<restart count>.log` with CRI lines
// `<RFC 3339 nano timestamp> <stdout|stderr> <P|F> <text>`, long lines split into P parts then
// an F, rotation as the kubelet's (the file renamed to `<n>.log.<YYYYMMDD-hhmmss>` and a new
// `<n>.log` begun; older rotated files gzipped), and container restarts (`<n+1>.log`).
package kubeletlogs

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Stream is the container stream a line is written to.
type Stream string

// The CRI streams.
const (
	Stdout Stream = "stdout"
	Stderr Stream = "stderr"
)

// RotationLayout is the timestamp format of a rotated file's suffix (the kubelet's).
const RotationLayout = "20060102-150405"

// Container is the log folder of one container of one pod. Its methods are safe for concurrent
// use.
type Container struct {
	dir string

	mu      sync.Mutex
	restart int
}

// New is the log folder of container of the pod namespace/name with uid, below root (the
// kubelet's /var/log/pods), made if missing, at restart count 0.
func New(root, namespace, name, uid, container string) (*Container, error) {
	// Kubernetes names and uids hold neither: the folder's name splits at "_" unambiguously.
	for _, f := range [...]struct{ field, v string }{{"namespace", namespace}, {"pod name", name}, {"pod uid", uid}, {"container", container}} {
		if f.v == "" || strings.ContainsAny(f.v, "/_") {
			return nil, fmt.Errorf("kubeletlogs: the %s %q cannot name a log folder", f.field, f.v)
		}
	}
	dir := filepath.Join(root, namespace+"_"+name+"_"+uid, container)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("kubeletlogs: make the container's log folder: %w", err)
	}
	return &Container{dir: dir}, nil
}

// Dir is the container's log folder.
func (c *Container) Dir() string { return c.dir }

// Restarts is the container's restart count: the number of the file written now.
func (c *Container) Restarts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.restart
}

// Path is the file written now, `<dir>/<restart count>.log`.
func (c *Container) Path() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.path()
}

func (c *Container) path() string { return filepath.Join(c.dir, fmt.Sprintf("%d.log", c.restart)) }

// Format is one CRI line, newline included.
func Format(t time.Time, s Stream, partial bool, text string) string {
	tag := "F"
	if partial {
		tag = "P"
	}
	return t.UTC().Format(time.RFC3339Nano) + " " + string(s) + " " + tag + " " + text + "\n"
}

// Line appends one full line (F) of text written at t to stream s.
func (c *Container) Line(t time.Time, s Stream, text string) error {
	return c.Partial(t, s, text)
}

// Partial appends one line written in parts, as the runtime splits a long line: every part but
// the last tagged P, the last F, part i stamped t plus i microseconds (the line's own time is
// the first part's).
func (c *Container) Partial(t time.Time, s Stream, parts ...string) error {
	if s != Stdout && s != Stderr {
		return fmt.Errorf("kubeletlogs: stream %q is neither stdout nor stderr", s)
	}
	if len(parts) == 0 {
		return errors.New("kubeletlogs: a line needs at least one part")
	}
	var b strings.Builder
	for i, p := range parts {
		if strings.ContainsAny(p, "\n") {
			return fmt.Errorf("kubeletlogs: part %d holds a newline: the runtime would have ended the line there", i)
		}
		b.WriteString(Format(t.Add(time.Duration(i)*time.Microsecond), s, i < len(parts)-1, p))
	}
	return c.Raw(b.String())
}

// Raw appends s as it is to the file written now (for unterminated or malformed lines).
func (c *Container) Raw(s string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := os.OpenFile(c.path(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("kubeletlogs: open the container's log: %w", err)
	}
	_, err = f.WriteString(s)
	return errors.Join(err, f.Close())
}

// Rotate does what the kubelet's log manager does when the file grew past its limit: the file
// written now is renamed `<n>.log.<at as YYYYMMDD-hhmmss>` and a new empty `<n>.log` begun; the
// rotated files before it are gzipped (`.gz`, the original removed), the kubelet keeping only
// the newest rotated file uncompressed. It returns the rotated file's path.
func (c *Container) Rotate(at time.Time) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.path()
	rotated := cur + "." + at.UTC().Format(RotationLayout)
	if _, err := os.Stat(rotated); err == nil {
		return "", fmt.Errorf("kubeletlogs: %s exists already: rotate at another second", rotated)
	}
	older, err := filepath.Glob(cur + ".*")
	if err != nil {
		return "", err
	}
	if err := os.Rename(cur, rotated); err != nil {
		return "", fmt.Errorf("kubeletlogs: rotate: %w", err)
	}
	for _, o := range older {
		if strings.HasSuffix(o, ".gz") || strings.HasSuffix(o, ".tmp") {
			continue
		}
		if err := compress(o); err != nil {
			return "", err
		}
	}
	f, err := os.OpenFile(cur, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return "", fmt.Errorf("kubeletlogs: begin a new log after the rotation: %w", err)
	}
	return rotated, f.Close()
}

// compress gzips path into path.gz (through a temporary file, as the kubelet does) and removes
// path.
func compress(path string) error {
	in, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("kubeletlogs: compress: %w", err)
	}
	defer in.Close()
	tmp := path + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("kubeletlogs: compress: %w", err)
	}
	zw := gzip.NewWriter(out)
	_, err = io.Copy(zw, in)
	err = errors.Join(err, zw.Close(), out.Close())
	if err == nil {
		err = os.Rename(tmp, path+".gz")
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("kubeletlogs: compress %s: %w", path, err)
	}
	return os.Remove(path)
}

// Restart begins the log of the container's next run, `<n+1>.log`, as the kubelet does when the
// container restarts; the old file stays. It returns the new restart count.
func (c *Container) Restart() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.restart++
	f, err := os.OpenFile(c.path(), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return c.restart, fmt.Errorf("kubeletlogs: begin the restarted container's log: %w", err)
	}
	return c.restart, f.Close()
}
