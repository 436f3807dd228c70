package localkube

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
)

// execUser is the account kwok runs `kubectl exec` commands as when localkube runs as root: a
// command sent to a simulated pod really runs on this machine, so it gets no more rights than
// any stranger.
const execUser = "nobody"

// execRule is the kwok ClusterExec (with its separator) that answers exec for every container
// of every pod: the command runs on this machine in the scratch folder dir, with HOME there too,
// as execUser when we are root (kwok sets the process's credentials, which needs root), else as
// ourselves. Port-forwarding is left to the tests that need it (ForwardPorts): each knows its own
// target.
func execRule(dir string, ids *execIDs) string {
	rule := `apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterExec
metadata:
  name: localkube-exec
spec:
  execs:
  - local:
      workDir: ` + strconv.Quote(dir) + `
      envs:
      - name: HOME
        value: ` + strconv.Quote(dir) + `
`
	if ids != nil {
		rule += fmt.Sprintf(`      securityContext:
        runAsUser: %d
        runAsGroup: %d
`, ids.uid, ids.gid)
	}
	return rule + "---\n"
}

// execIDs are the user and group ids exec'd commands run as.
type execIDs struct{ uid, gid int }

// makeExecDir makes the scratch folder exec'd commands run in, outside the work folder (whose
// 0700 parents execUser could not cross), and returns it with the ids to run them as (nil: as
// ourselves).
func makeExecDir() (string, *execIDs, error) {
	dir, err := os.MkdirTemp("", "localkube-exec-")
	if err != nil {
		return "", nil, fmt.Errorf("creating the exec folder: %w", err)
	}
	if os.Geteuid() != 0 {
		return dir, nil, nil
	}
	u, err := user.Lookup(execUser)
	if err != nil {
		os.Remove(dir)
		return "", nil, fmt.Errorf("looking up the exec user %s: %w", execUser, err)
	}
	ids := &execIDs{}
	if ids.uid, err = strconv.Atoi(u.Uid); err == nil {
		ids.gid, err = strconv.Atoi(u.Gid)
	}
	if err == nil {
		err = os.Chown(dir, ids.uid, ids.gid)
	}
	if err != nil {
		os.Remove(dir)
		return "", nil, fmt.Errorf("giving the exec folder to %s: %w", execUser, err)
	}
	return dir, ids, nil
}
