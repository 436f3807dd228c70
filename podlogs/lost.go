package podlogs

import (
	"os"
	"regexp"
	"strconv"
	"time"
)

// Lost is a log file, or a file's tail, that went before the follower read it to its end: the
// kubelet rotated it away past what it keeps (it compresses every rotated file but the newest
// and deletes the oldest beyond containerLogMaxFiles), or a checkpoint's file was gone when the
// reader started again.
type Lost struct {
	// Name is the file's name (a compressed file's, with its .gz); Offset where its unread part
	// began (0: all of it).
	Name   string
	Offset int64
}

// Lost returns what was lost since the last call (at least that: a file deleted outright before
// it was ever listed leaves no trace).
func (f *Follower) Lost() []Lost {
	l := f.lost
	f.lost = nil
	return l
}

var gzName = regexp.MustCompile(`^(\d+)\.log\.(\d{8}-\d{6})\.gz$`)

// rotationLayout is the kubelet's rotation timestamp in a rotated file's name.
const rotationLayout = "20060102-150405"

// skippedBetween records the compressed files written after cur and before next: the follower
// goes on at next, so they are lost. cur's own compressed file, if cur was still the file being
// written when last listed, is the first compressed file of its restart rotated no earlier than
// its first line (the follower read cur to its end through its open descriptor, or cur is the
// checkpoint's file already recorded lost).
func (f *Follower) skippedBetween(cur logFile, next *logFile) {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return
	}
	var firstAt string
	if t, err := time.Parse(time.RFC3339Nano, cur.first); err == nil {
		firstAt = t.UTC().Format(rotationLayout)
	}
	ownSkipped := cur.rotated != ""
	var lost []logFile
	for _, e := range entries {
		m := gzName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			continue
		}
		g := logFile{name: e.Name(), restart: n, rotated: m[2]}
		after := g.restart > cur.restart ||
			(g.restart == cur.restart && cur.rotated != "" && g.rotated > cur.rotated) ||
			(g.restart == cur.restart && cur.rotated == "" && g.rotated >= firstAt)
		if !after || (next != nil && !g.before(*next)) {
			continue
		}
		lost = append(lost, g)
	}
	sortFiles(lost)
	for _, g := range lost {
		if !ownSkipped && g.restart == cur.restart {
			ownSkipped = true // cur itself, compressed
			continue
		}
		f.lost = append(f.lost, Lost{Name: g.name})
	}
}
