package podlogs

// FileSystem and TempFile are what Checkpoints.Save writes through (for the specs' crashing
// file system).
type (
	FileSystem = fileSystem
	TempFile   = tempFile
)

// OpenCheckpointsOn is OpenCheckpoints saving through fs.
func OpenCheckpointsOn(dir string, fs FileSystem) (*Checkpoints, error) {
	return openCheckpoints(dir, fs)
}
