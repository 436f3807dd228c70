// Package podlogs reads the kubelet's CRI container log files on a node: it parses their lines
// (ParseLine), follows one container's log folder across the kubelet's rotations and the
// container's restarts (Follower), and keeps the position each container was read to in a
// folder of the reader's own (Checkpoints), so a restarted reader resumes where it stopped.
//
// Layout (kubelet): <root>/<namespace>_<pod>_<pod uid>/<container>/<restart count>.log; a
// rotation renames <n>.log to <n>.log.<YYYYMMDD-hhmmss> (gzipped later, except the newest) and
// starts a new <n>.log; a restart starts <n+1>.log.
//
// Design: the Follower polls. Next reads whatever the files hold now and returns; it starts no
// goroutine, so a test drives it step by step and an owner stops it by not calling it again.
// Polling was chosen over inotify (fsnotify is not a dependency of this module): one folder
// listing and a read per container per tick is cheap for the ~1,000 files of a full node, it
// needs no watch per file (inotify's per-user watch limit is shared with everything else on the
// node), and it sees renames, truncations and new files the same way whatever the filesystem.
// The cost is a delay of up to one poll interval.
//
// A file is identified by its device and inode, which the kubelet's rename keeps: after a
// rotation the renamed file is read to its end through the open descriptor before the next file
// is opened; a successor (a newer <n>.log or <n+1>.log) exists only once the runtime writes
// there, so nothing more is written to the old one.
package podlogs
