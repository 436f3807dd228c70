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

// checkpointFile is the file Checkpoints keeps in its folder.
const checkpointFile = "positions.json"

// Checkpoints are the positions of every followed container, by key (ContainerKey), kept in a
// folder of the reader's own. Set records a position in memory (once the lines before it are
// acknowledged); Save writes them all atomically (a temporary file renamed over the last one),
// so a crash leaves either the old or the new set, never a torn one. Safe for concurrent use.
type Checkpoints struct {
	dir string

	saving    sync.Mutex // one Save at a time: the last rename holds the newest positions
	mu        sync.Mutex
	positions map[string]Position
}

// OpenCheckpoints reads the positions saved in dir (none if it holds none yet). dir must exist
// and be writable; a checkpoint file that cannot be read back is an error, nothing is replaced.
func OpenCheckpoints(dir string) (*Checkpoints, error) {
	c := &Checkpoints{dir: dir, positions: map[string]Position{}}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("open checkpoints folder: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("open checkpoints folder: %s is not a folder", dir)
	}
	data, err := os.ReadFile(filepath.Join(dir, checkpointFile))
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read checkpoints: %w", err)
	}
	if err := json.Unmarshal(data, &c.positions); err != nil {
		return nil, fmt.Errorf("read checkpoints %s: %w", filepath.Join(dir, checkpointFile), err)
	}
	if c.positions == nil {
		c.positions = map[string]Position{}
	}
	return c, nil
}

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

// Save writes every position atomically.
func (c *Checkpoints) Save() error {
	c.saving.Lock()
	defer c.saving.Unlock()
	c.mu.Lock()
	data, err := json.Marshal(c.positions)
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("encode checkpoints: %w", err)
	}
	tmp, err := os.CreateTemp(c.dir, checkpointFile+".*.tmp")
	if err != nil {
		return fmt.Errorf("save checkpoints: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
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
	if err := os.Rename(tmp.Name(), filepath.Join(c.dir, checkpointFile)); err != nil {
		return fmt.Errorf("save checkpoints: %w", err)
	}
	return nil
}
