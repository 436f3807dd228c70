package localkube

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// buildScript is where the pinned control plane's build lives, relative to the repository root.
const buildScript = "tools/kube/build.sh"

// BinDir builds (once, into a per-user cache) the pinned control plane binaries and returns the
// folder that holds them. Build progress goes to stderr: a cold build takes about 15 minutes and a
// silent wait that long looks like a hang. OPI_KUBE_BIN_DIR overrides the folder (build.sh honours
// it).
func BinDir() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("bash", filepath.Join(root, buildScript))
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the local control plane with %s: %w", buildScript, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if dir == "" {
		return "", fmt.Errorf("%s printed no folder", buildScript)
	}
	return dir, nil
}

// RepoRoot finds the repository root: the nearest folder above the working directory, or above
// this source file, that holds tools/kube/build.sh. The source file fallback lets tests and
// binaries run from anywhere inside or outside the tree on the machine that built them.
func RepoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	for _, start := range starts {
		for dir := start; ; dir = filepath.Dir(dir) {
			if _, err := os.Stat(filepath.Join(dir, buildScript)); err == nil {
				return dir, nil
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	return "", errors.New("finding the repository root: no folder above the working directory holds " + buildScript)
}
