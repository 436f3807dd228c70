package podlogs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// checkpointFile is the file Checkpoints keeps in its folder; unreadableFile is where an
// unreadable one is moved, for a person to look at (the next Save writes a new one).
const (
	checkpointFile = "positions.json"
	unreadableFile = checkpointFile + ".unreadable"
)

// Checkpoints are the positions of every followed container, by key (ContainerKey), kept in a
// folder of the reader's own. Set records a position in memory (once the lines before it are
// acknowledged); Save writes them all atomically (a fully written and fsynced temporary file
// renamed over the last one), so a crash leaves either the old or the new set, never a torn
// one. Safe for concurrent use.
type Checkpoints struct {
	dir        string
	fs         fileSystem
	unreadable error

	saving    sync.Mutex // one Save at a time: the last rename holds the newest positions
	mu        sync.Mutex
	positions map[string]Position
}

// fileSystem is what Save writes through: the operating system's, or a spec's that crashes
// part-way through a save.
type fileSystem interface {
	CreateTemp(dir, pattern string) (tempFile, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	// SyncDir makes a rename in dir durable.
	SyncDir(dir string) error
}

// tempFile is the temporary file a save writes.
type tempFile interface {
	Name() string
	Write(b []byte) (int, error)
	Sync() error
	Close() error
}

type osFS struct{}

func (osFS) CreateTemp(dir, pattern string) (tempFile, error) { return os.CreateTemp(dir, pattern) }
func (osFS) Rename(oldpath, newpath string) error             { return os.Rename(oldpath, newpath) }
func (osFS) Remove(name string) error                         { return os.Remove(name) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// OpenCheckpoints reads the positions saved in dir (none if it holds none yet). dir must exist
// and be writable. A checkpoint file that cannot be read back (torn by a disk fault, edited by
// hand) does not stop the reader: it starts with no positions (every container from the start
// of its files: lines sent twice, none lost), the file is moved aside to
// positions.json.unreadable, and Unreadable says why.
func OpenCheckpoints(dir string) (*Checkpoints, error) {
	return openCheckpoints(dir, osFS{})
}

func openCheckpoints(dir string, fs fileSystem) (*Checkpoints, error) {
	c := &Checkpoints{dir: dir, fs: fs, positions: map[string]Position{}}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("open checkpoints folder: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("open checkpoints folder: %s is not a folder", dir)
	}
	path := filepath.Join(dir, checkpointFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err == nil {
		err = json.Unmarshal(data, &c.positions)
	}
	if err != nil {
		c.positions = map[string]Position{}
		c.unreadable = fmt.Errorf("read checkpoints %s: %w", path, err)
		if err := os.Rename(path, filepath.Join(dir, unreadableFile)); err != nil {
			c.unreadable = errors.Join(c.unreadable, fmt.Errorf("move the unreadable checkpoints aside: %w", err))
		}
		return c, nil
	}
	if c.positions == nil {
		c.positions = map[string]Position{}
	}
	return c, nil
}

// Unreadable is why the saved checkpoints could not be read when they were opened (nil if they
// were, or there were none).
func (c *Checkpoints) Unreadable() error { return c.unreadable }

// ContainerKey is the key of a container log folder below the pod log root:
// "<namespace>_<pod>_<uid>/<container>".
func ContainerKey(root, containerDir string) (string, error) {
	rel, err := filepath.Rel(root, containerDir)
	if err != nil || strings.HasPrefix(rel, "..") || strings.Count(filepath.ToSlash(rel), "/") != 1 {
		return "", fmt.Errorf("container log folder %q is not <pod folder>/<container> below %q", containerDir, root)
	}
	return filepath.ToSlash(rel), nil
}

// Get is the position recorded for key (the zero Position if none).
func (c *Checkpoints) Get(key string) Position {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.positions[key]
}

// Set records key's position, to be written by the next Save.
func (c *Checkpoints) Set(key string, p Position) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.positions[key] = p
}

// Keys are the keys of every position recorded.
func (c *Checkpoints) Keys() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.positions))
	for k := range c.positions {
		keys = append(keys, k)
	}
	return keys
}

// Delete forgets key (its container is gone).
func (c *Checkpoints) Delete(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.positions, key)
}

// Save writes every position atomically: the checkpoint file is only ever replaced by a rename
// of a temporary file written to its end and fsynced, so a crash at any point leaves the old
// set or the new one.
func (c *Checkpoints) Save() error {
	c.saving.Lock()
	defer c.saving.Unlock()
	c.mu.Lock()
	data, err := json.Marshal(c.positions)
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("encode checkpoints: %w", err)
	}
	tmp, err := c.fs.CreateTemp(c.dir, checkpointFile+".*.tmp")
	if err != nil {
		return fmt.Errorf("save checkpoints: %w", err)
	}
	defer c.fs.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("save checkpoints: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save checkpoints: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save checkpoints: %w", err)
	}
	if err := c.fs.Rename(tmp.Name(), filepath.Join(c.dir, checkpointFile)); err != nil {
		return fmt.Errorf("save checkpoints: %w", err)
	}
	if err := c.fs.SyncDir(c.dir); err != nil {
		return fmt.Errorf("save checkpoints: sync folder: %w", err)
	}
	return nil
}
