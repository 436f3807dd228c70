// Package podlogs reads the kubelet's CRI container log files on a node: it parses their lines
// (ParseLine), follows one container's log folder across the kubelet's rotations and the
// container's restarts (Follower), and keeps the position each container was read to in a
// folder of the reader's own (Checkpoints), so a restarted reader resumes where it stopped.
//
// Layout (kubelet): <root>/<namespace>_<pod>_<pod uid>/<container>/<restart count>.log; a
// rotation renames <n>.log to <n>.log.<YYYYMMDD-hhmmss> (gzipped later, except the newest) and
// starts a new <n>.log; a restart starts <n+1>.log.
//
// Design: the Follower is driven step by step. Next reads whatever the files hold now and
// returns; it starts no goroutine, so a test drives it step by step and an owner decides when
// to call it: the node agent calls it when inotify (github.com/fsnotify/fsnotify, one watch per
// container folder, none per file) reports a change in the folder, and polls (calls it every
// poll interval) where notification is unavailable: no inotify instance, a folder that cannot be
// watched (not there yet, the per-user watch limit reached) or an event queue that overflowed
// (then every folder is read at once). Notification only decides when Next runs: whatever the
// files hold, renames, truncations and new files included, Next sees the same way as a poll.
//
// A file is identified by its device and inode, which the kubelet's rename keeps: after a
// rotation the renamed file is read to its end through the open descriptor before the next file
// is opened; a successor (a newer <n>.log or <n+1>.log) exists only once the runtime writes
// there, so nothing more is written to the old one.
package podlogs
