package podlogs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// DefaultMaxLineBytes bounds one emitted line's text (Diego's log streamer cuts messages at
// 60 KiB as well, below what a Loggregator envelope may carry).
const DefaultMaxLineBytes = 60 * 1024

// headerSlack is room for a CRI line's timestamp, stream and tag besides its content.
const headerSlack = 64

// readBufferSize is a Follower's read buffer: a line longer than it is gathered (up to the line
// bound) in a slice of its own, so that the buffer, held for as long as the Follower, stays small
// (a node's 110 followers would hold 6.6 MiB with buffers of the 60 KiB bound).
const readBufferSize = 4 << 10

// Line is one log line of a container, partial lines joined.
type Line struct {
	Time   time.Time
	Stream Stream
	Text   string
}

// Position is where reading resumes in a container's log folder: a file, by identity, and the
// offset of the first byte not yet consumed.
type Position struct {
	Device uint64 `json:"dev"`
	Inode  uint64 `json:"ino"`
	// Name is the file's name when the position was taken, for people reading checkpoints;
	// the identity decides.
	Name   string `json:"name"`
	Offset int64  `json:"offset"`
	// First is the timestamp of the file's first line: file systems reuse inodes, so a file
	// found by identity is the one meant only if it also starts with the same line.
	First string `json:"first,omitempty"`
	// Past holds, for a stream read further than Offset, where its lines resume: a partial line
	// pending on one stream holds Offset at its start, and the other stream's lines before its
	// mark were taken care of already (they are read again after a restart, not sent again).
	// Positions saved before it existed have none: reading resumes at Offset for both streams.
	Past map[Stream]Mark `json:"past,omitempty"`
}

// Mark is a place in a file known by its identity and, against inode reuse, the timestamp of
// its first line (as Position's First).
type Mark struct {
	Device uint64 `json:"dev"`
	Inode  uint64 `json:"ino"`
	Offset int64  `json:"offset"`
	First  string `json:"first,omitempty"`
}

// IsZero reports whether p names no file (start from the oldest file there is).
func (p Position) IsZero() bool { return p.Device == 0 && p.Inode == 0 }

// Options configure a Follower.
type Options struct {
	// MaxLineBytes bounds a line's text (DefaultMaxLineBytes if 0): a longer physical line is
	// cut, partial lines joining past it are emitted in pieces.
	MaxLineBytes int
	// Done, if not nil, stops a Next under way once closed (checked before each line): Next
	// returns ErrStopped, and the follower must not be used again (it is past the last line
	// emit was called with, which its caller may not have taken care of).
	Done <-chan struct{}
}

// ErrStopped is Next's error once Options.Done is closed.
var ErrStopped = errors.New("container log reading stopped")

// Follower reads one container's log folder. It is not safe for concurrent use.
type Follower struct {
	dir     string
	maxLine int
	start   Position
	done    <-chan struct{}

	file    *os.File
	cur     logFile
	offset  int64
	br      *bufio.Reader
	pending map[Stream]*pendingLine
	// seq numbers the files in the order opened, to order places in different files.
	seq int
	// past are the marks of the start position not reached yet: a stream's lines before its
	// mark are skipped (they were taken care of before the restart).
	past map[Stream]Mark

	malformed uint64
	lost      []Lost
}

type pendingLine struct {
	time  time.Time
	text  []byte
	start Position
	seq   int // the file start is in
}

// NewFollower follows the container log folder dir, from position from (the zero Position:
// from the beginning of the oldest uncompressed file).
func NewFollower(dir string, from Position, opts Options) *Follower {
	max := opts.MaxLineBytes
	if max <= 0 {
		max = DefaultMaxLineBytes
	}
	past := map[Stream]Mark{}
	for s, m := range from.Past {
		if s == Stdout || s == Stderr {
			past[s] = m
		}
	}
	return &Follower{
		dir: dir, maxLine: max, start: from, done: opts.Done,
		br:      bufio.NewReaderSize(nil, min(readBufferSize, max+headerSlack)),
		pending: map[Stream]*pendingLine{},
		past:    past,
	}
}

// Malformed counts the lines skipped because they were no CRI log lines.
func (f *Follower) Malformed() uint64 { return f.malformed }

// Close closes the open file, if any.
func (f *Follower) Close() error {
	if f.file == nil {
		return nil
	}
	err := f.file.Close()
	f.file = nil
	return err
}

// Next reads every complete line the folder holds now and calls emit for each, in order, with
// the position to resume from once that line (and every line before it) is taken care of. A
// missing or empty folder is no error: nothing is emitted. emit may block (back pressure).
func (f *Follower) Next(emit func(Line, Position)) error {
	for {
		if f.file == nil {
			ok, err := f.openFirst()
			if err != nil || !ok {
				return err
			}
		}
		if err := f.readAvailable(emit, false); err != nil {
			return err
		}
		next, err := f.successor()
		if err != nil || next == nil {
			return err
		}
		// The runtime writes to the successor now: the current file's tail, an unterminated
		// last line included, is all it will ever hold.
		if err := f.readAvailable(emit, true); err != nil {
			return err
		}
		f.dropMarksIn(f.cur)
		switched, err := f.open(*next, 0)
		if err != nil || !switched {
			return err
		}
	}
}

// dropMarksIn forgets the marks in lf, a file being left or truncated: it holds nothing more at
// or past them.
func (f *Follower) dropMarksIn(lf logFile) {
	for s, m := range f.past {
		if m.Device == lf.dev && m.Inode == lf.ino {
			delete(f.past, s)
		}
	}
}

// dropGoneMarks forgets the marks in files no longer in files (gone before they were read): the
// streams' later lines are then sent, not skipped for good.
func (f *Follower) dropGoneMarks(files []logFile) {
	for s, m := range f.past {
		found := false
		for _, lf := range files {
			found = found || (lf.dev == m.Device && lf.ino == m.Inode)
		}
		if !found {
			delete(f.past, s)
		}
	}
}

func (f *Follower) openFirst() (bool, error) {
	files, err := listFiles(f.dir)
	if err != nil || len(files) == 0 {
		return false, err
	}
	f.dropGoneMarks(files)
	if !f.start.IsZero() {
		for _, lf := range files {
			if lf.dev == f.start.Device && lf.ino == f.start.Inode {
				ok, err := f.open(lf, f.start.Offset)
				if err != nil || !ok {
					return ok, err
				}
				if f.start.First == "" || f.start.First == firstStamp(f.file) {
					f.cur.first = f.start.First
					return true, nil
				}
				// The inode was reused: a new file, not the one the position was taken in.
				f.Close()
				break
			}
		}
	}
	// No position, or its file is gone (compressed or deleted: every plain file is newer).
	if !f.start.IsZero() {
		f.lost = append(f.lost, Lost{Name: f.start.Name, Offset: f.start.Offset})
		gone := logFile{name: f.start.Name, first: f.start.First}
		if m := logName.FindStringSubmatch(f.start.Name); m != nil {
			gone.restart, _ = strconv.Atoi(m[1])
			gone.rotated = m[2]
		}
		f.skippedBetween(gone, &files[0])
		f.start = Position{}
		clear(f.past) // read from the oldest file: nothing there was taken care of for sure
	}
	return f.open(files[0], 0)
}

// firstStamp is the timestamp field of file's first line ("" if there is none yet).
func firstStamp(file *os.File) string {
	buf := make([]byte, headerSlack)
	n, _ := file.ReadAt(buf, 0)
	stamp, _, ok := strings.Cut(string(buf[:n]), " ")
	if !ok {
		return ""
	}
	return stamp
}

// open opens lf at offset, replacing the current file. It opens nothing (false) if the name
// now holds another file (renamed since it was listed): the next call lists again.
func (f *Follower) open(lf logFile, offset int64) (bool, error) {
	file, err := os.Open(filepath.Join(f.dir, lf.name))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open container log: %w", err)
	}
	info, err := file.Stat()
	if err != nil {
		file.Close()
		return false, fmt.Errorf("stat container log: %w", err)
	}
	dev, ino := identity(info)
	if dev != lf.dev || ino != lf.ino {
		file.Close()
		return false, nil
	}
	f.Close()
	f.file, f.cur, f.offset = file, lf, offset
	f.seq++
	for s, m := range f.past {
		if m.Device == dev && m.Inode == ino && m.First != "" && m.First != firstStamp(file) {
			delete(f.past, s) // the inode was reused: not the file the mark was taken in
		}
	}
	return true, nil
}

func (f *Follower) pos(offset int64) Position {
	return Position{Device: f.cur.dev, Inode: f.cur.ino, Name: f.cur.name, Offset: offset, First: f.cur.first}
}

// readAvailable consumes the current file's complete lines from the offset on; with final,
// also an unterminated last line.
func (f *Follower) readAvailable(emit func(Line, Position), final bool) error {
	info, err := f.file.Stat()
	if err != nil {
		return fmt.Errorf("stat container log: %w", err)
	}
	if info.Size() < f.offset {
		// Truncated in place (not the kubelet's way, but copytruncate-style tools do it):
		// what is there now is new.
		f.offset = 0
		f.dropMarksIn(f.cur)
	}
	if _, err := f.file.Seek(f.offset, io.SeekStart); err != nil {
		return fmt.Errorf("seek container log: %w", err)
	}
	f.br.Reset(f.file)
	for {
		select {
		case <-f.done:
			return ErrStopped
		default:
		}
		line, err := f.br.ReadSlice('\n')
		switch {
		case err == nil:
			f.consume(line, len(line), emit)
		case errors.Is(err, bufio.ErrBufferFull):
			// Longer than the read buffer: gather its head up to the bound, skip the rest up to
			// the newline.
			head, n, complete, err := f.longLine(line)
			if err != nil {
				return err
			}
			if !complete && !final {
				return nil // not written out yet: read again from its start next time
			}
			f.consume(head, n, emit)
		case errors.Is(err, io.EOF):
			if final && len(line) > 0 {
				f.consume(line, len(line), emit)
			}
			return nil
		default:
			return fmt.Errorf("read container log: %w", err)
		}
	}
}

// longLine reads the rest of a line longer than the read buffer, whose first part is first: its
// head (the line up to maxLine plus the header's room, the newline included if it is in there),
// its length in the file, and whether its newline was read.
func (f *Follower) longLine(first []byte) (head []byte, n int, complete bool, err error) {
	limit := f.maxLine + headerSlack
	head = append(make([]byte, 0, min(limit, 2*len(first))), first[:min(len(first), limit)]...)
	n = len(first)
	for len(head) < limit {
		more, err := f.br.ReadSlice('\n')
		n += len(more)
		head = append(head, more[:min(len(more), limit-len(head))]...)
		switch {
		case err == nil:
			return head, n, true, nil
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return head, n, false, nil
		default:
			return nil, n, false, fmt.Errorf("read container log: %w", err)
		}
	}
	n, complete, err = f.skipLine(n)
	return head, n, complete, err
}

func (f *Follower) skipLine(n int) (int, bool, error) {
	for {
		more, err := f.br.ReadSlice('\n')
		n += len(more)
		switch {
		case err == nil:
			return n, true, nil
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return n, false, nil
		default:
			return n, false, fmt.Errorf("read container log: %w", err)
		}
	}
}

// consume takes one physical line of n bytes in the file (raw is its head if it was cut).
func (f *Follower) consume(raw []byte, n int, emit func(Line, Position)) {
	if f.offset == 0 {
		stamp, _, _ := strings.Cut(string(raw[:min(len(raw), headerSlack)]), " ")
		f.cur.first = stamp
	}
	start := f.pos(f.offset)
	f.offset += int64(n)
	for s, m := range f.past {
		if m.Device == start.Device && m.Inode == start.Inode && m.Offset <= start.Offset {
			delete(f.past, s) // reached: the stream's lines from here on are new
		}
	}
	e, err := ParseLine(raw)
	if err != nil {
		f.malformed++
		return
	}
	if _, ok := f.past[e.Stream]; ok {
		return // sent before the restart (the other stream's partial line held the position)
	}
	content := e.Content
	if len(content) > f.maxLine {
		content = content[:f.maxLine]
	}
	p := f.pending[e.Stream]
	if p != nil && len(p.text)+len(content) > f.maxLine {
		// The joined line would pass the bound: what is joined so far goes out as a piece, and
		// reading would resume at this physical line.
		delete(f.pending, e.Stream)
		emit(Line{Time: p.time, Stream: e.Stream, Text: string(p.text)}, f.resumeAt(start))
		p = nil
	}
	if p == nil && !e.Partial {
		// A whole line, nothing pending on its stream: emitted as it is.
		emit(Line{Time: e.Time, Stream: e.Stream, Text: string(content)}, f.resumeAt(f.pos(f.offset)))
		return
	}
	if p == nil {
		p = &pendingLine{time: e.Time, start: start, seq: f.seq}
		f.pending[e.Stream] = p
	}
	p.text = append(p.text, content...)
	if !e.Partial {
		delete(f.pending, e.Stream)
		emit(Line{Time: p.time, Stream: e.Stream, Text: string(p.text)}, f.resumeAt(f.pos(f.offset)))
	}
}

// resumeAt is the position once the line just emitted is taken care of: after it, unless a
// stream has a partial line pending (then reading resumes at its start), with the marks of the
// streams read further than that.
func (f *Follower) resumeAt(after Position) Position {
	const notReached = math.MaxInt // a mark of the start position: past every file read so far
	type place struct {
		pos Position
		seq int
	}
	before := func(a, b place) bool {
		if a.seq != b.seq {
			return a.seq < b.seq
		}
		return a.pos.Offset < b.pos.Offset
	}
	streams := [...]Stream{Stdout, Stderr}
	var at [len(streams)]place
	resume := place{after, f.seq}
	for i, s := range streams {
		at[i] = place{after, f.seq}
		if p := f.pending[s]; p != nil {
			at[i] = place{p.start, p.seq}
		} else if m, ok := f.past[s]; ok {
			at[i] = place{Position{Device: m.Device, Inode: m.Inode, Offset: m.Offset, First: m.First}, notReached}
		}
		if before(at[i], resume) {
			resume = at[i]
		}
	}
	pos := resume.pos
	pos.Past = nil
	for i, s := range streams {
		if before(resume, at[i]) {
			if pos.Past == nil {
				pos.Past = map[Stream]Mark{}
			}
			p := at[i].pos
			pos.Past[s] = Mark{Device: p.Device, Inode: p.Inode, Offset: p.Offset, First: p.First}
		}
	}
	return pos
}

// successor is the file the runtime writes after the current one, if it exists yet.
func (f *Follower) successor() (*logFile, error) {
	files, err := listFiles(f.dir)
	if err != nil {
		return nil, err
	}
	defer func() { f.dropGoneMarks(files) }()
	found := false
	for i, lf := range files {
		if lf.dev == f.cur.dev && lf.ino == f.cur.ino {
			f.cur.name, f.cur.restart, f.cur.rotated = lf.name, lf.restart, lf.rotated // renamed
			found = true
			if i+1 < len(files) {
				return &files[i+1], nil
			}
		}
	}
	if !found && len(files) > 0 {
		// The current file was compressed (or removed) after rotations: the kubelet compresses
		// the oldest first, so every plain file left is newer, the oldest of them next.
		f.skippedBetween(f.cur, &files[0])
		return &files[0], nil
	}
	return nil, nil
}

// logFile is one uncompressed log file of a container's folder.
type logFile struct {
	name     string
	restart  int
	rotated  string // the rotation timestamp; "" for the file being written
	dev, ino uint64
	first    string // its first line's timestamp, once read
}

// before orders a folder's files as they were written: by restart count, a restart's rotated
// files (by timestamp) before its current file.
func (a logFile) before(b logFile) bool {
	if a.restart != b.restart {
		return a.restart < b.restart
	}
	if (a.rotated == "") != (b.rotated == "") {
		return a.rotated != ""
	}
	return a.rotated < b.rotated
}

var logName = regexp.MustCompile(`^(\d+)\.log(?:\.(\d{8}-\d{6}))?$`)

// listFiles lists dir's uncompressed log files in write order; a missing dir has none.
func listFiles(dir string) ([]logFile, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list container logs: %w", err)
	}
	var files []logFile
	for _, e := range entries {
		m := logName.FindStringSubmatch(e.Name())
		if m == nil || !e.Type().IsRegular() {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed since the listing
		}
		dev, ino := identity(info)
		files = append(files, logFile{name: e.Name(), restart: n, rotated: m[2], dev: dev, ino: ino})
	}
	sortFiles(files)
	return files, nil
}

func sortFiles(files []logFile) {
	sort.Slice(files, func(i, j int) bool { return files[i].before(files[j]) })
}

func identity(info os.FileInfo) (dev, ino uint64) {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), st.Ino // Dev is int32 on some platforms
	}
	return 0, 0
}
