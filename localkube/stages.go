package localkube

// CrashAnnotation marks a pod that the simulated kubelet (kwok) reports as crash-looping instead
// of running: phase Running, not Ready, its containers waiting in CrashLoopBackOff after exiting
// with code 1. Put it on a pod template (annotation value "true") to test how crashes surface.
const CrashAnnotation = AnnotationPrefix + "crash"

// AnnotationPrefix starts the local control plane's annotations. opi passes a user annotation
// only with a prefix its operator allows: the integration suite and `make run` allow this one
// (opi connect --user-annotation-prefixes), next to CC's own prometheus.io/.
const AnnotationPrefix = "localkube.opi-bridge/"

// crashStage is our own kwok Stage, loaded after kwok's fast stages (written into the bin folder
// by build.sh). It matches the same pods kwok's pod-ready does (Pending, not yet Ready, not being
// deleted) plus the annotation, and wins over pod-ready (see podStage); afterwards the pod is
// Running, which no fast stage matches except pod-delete (on deletion), so the status stays as
// written.
var crashStage = podStage("localkube-pod-crash-loop-back-off", `    matchAnnotations:
      `+CrashAnnotation+`: "true"
    matchExpressions:
`+notDeleted+pendingNotReady, statusPatch+`        {{ $pod := .metadata }}
`+unreadyConditions+unreadyContainers+`          restartCount: 1
          state:
            waiting:
              reason: CrashLoopBackOff
              message: {{ printf "back-off 10s restarting failed container=%s pod=%s_%s(%s)" .name $pod.name $pod.namespace $pod.uid | Quote }}
          lastState:
            terminated:
              exitCode: 1
              reason: Error
              startedAt: {{ $now | Quote }}
              finishedAt: {{ $now | Quote }}
        {{ end }}
`+hostIPsStatus+`        {{ $podIPs := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
        {{ with $podIPs }}
        podIP: {{ index . 0 | Quote }}
        podIPs:
        {{ range . }}
        - ip: {{ . | Quote }}
        {{ end }}
        {{ end }}
        phase: Running
        startTime: {{ $now | Quote }}
`)

// UnpullableImage is the text that makes an image unpullable on the simulated kubelet: a pod
// whose container image contains it is reported as a kubelet reports an image it cannot pull
// (container waiting in ImagePullBackOff), e.g. "registry.example.com/does-not-exist:1".
const UnpullableImage = "does-not-exist"

// imagePullStage is our kwok Stage for UnpullableImage, chosen over kwok's pod-ready as
// crashStage is. A real kubelet leaves such a pod in phase Pending; kwok would then start it with
// pod-ready on the next event, so the stage reports phase Running (no fast stage matches a
// Running pod but pod-delete) with the container waiting: opi's instance state does not depend
// on the phase for a waiting reason.
var imagePullStage = podStage("localkube-pod-image-pull-back-off", `    matchExpressions:
    - key: '.spec.containers.[] | select( .image | contains("`+UnpullableImage+`") ) | .image'
      operator: 'Exists'
`+notDeleted+pendingNotReady, statusPatch+unreadyConditions+unreadyContainers+`          restartCount: 0
          state:
            waiting:
              reason: ImagePullBackOff
              message: {{ printf "Back-off pulling image %q" .image | Quote }}
        {{ end }}
`+hostIPsStatus+`        phase: Running
        startTime: {{ $now | Quote }}
`)

// TaskSourceLabel marks the pods of opi's tasks; the task stages below act only on them.
const TaskSourceLabel = "opi-bridge.io/source-type"

// taskCommand is the jq query kwok matches a task pod's command with: true for
// ["/bin/sh","-c","exit N"].
const taskCommand = `.spec.containers.[0].command | join(" ") | test("^/bin/sh -c exit [0-9]+$")`

// taskStages end the pods of tasks, since no container runs here: a running task pod whose first
// container's command is ["/bin/sh","-c","exit N"] terminates with exit code N (phase Succeeded
// with reason Completed for 0, else Failed with reason Error), and any other task pod keeps
// running (a cancel can then stop it). Both win over kwok's fast pod-complete stage (see
// podStage), which would otherwise complete every pod owned by a Job at once.
var taskStages = podStage("localkube-task-pod-exit", runningTask("In"), statusPatch+`        {{ $code := index ( index .spec.containers 0 ).command 2 | trimPrefix "exit " | atoi }}
        conditions:
        - lastTransitionTime: {{ $now | Quote }}
          status: "False"
          reason: PodCompleted
          type: Ready
        - lastTransitionTime: {{ $now | Quote }}
          status: "False"
          reason: PodCompleted
          type: ContainersReady
`+unreadyContainers+`          restartCount: 0
          state:
            terminated:
              exitCode: {{ $code }}
              reason: {{ if eq $code 0 }}Completed{{ else }}Error{{ end }}
              startedAt: {{ $now | Quote }}
              finishedAt: {{ $now | Quote }}
        {{ end }}
        phase: {{ if eq $code 0 }}Succeeded{{ else }}Failed{{ end }}
`) + "---\n" + podStage("localkube-task-pod-keep-running", runningTask("NotIn"), "")

// runningTask is the selector of the running task pods whose command is (operator "In") or is
// not (operator "NotIn") taskCommand's.
func runningTask(operator string) string {
	return `    matchLabels:
      ` + TaskSourceLabel + `: TASK
    matchExpressions:
` + notDeleted + `    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '` + taskCommand + `'
      operator: '` + operator + `'
      values:
      - 'true'
`
}

// podStage is one of our kwok Stages: it acts on the pods selector matches (the lines under
// `selector:`) by steps (the lines after `weight:`; none to keep a pod as it is).
//
// Its weight of 1 makes it win over kwok's fast stages: kwok collects every stage whose selector
// matches a pod and, when more than one does, picks one at random in proportion to `weight`,
// leaving out stages of weight 0 whenever the total is positive (sigs.k8s.io/kwok/pkg/utils/lifecycle
// Lifecycle.Match). The fast stages have no weight (0), so for a pod that one of ours matches,
// ours is chosen every time.
func podStage(name, selector, steps string) string {
	return `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: ` + name + `
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
` + selector + `  weight: 1
` + steps
}

// The parts of the stages that more than one writes alike (each a whole number of lines,
// indented for its place in a stage).
const (
	// notDeleted: a selector's match expression for pods not being deleted.
	notDeleted = `    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
`
	// pendingNotReady: a selector's match expressions for the pods kwok's pod-ready starts.
	pendingNotReady = `    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Pending'
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values:
      - 'True'
`
	// statusPatch: the one step, a patch of the pod's status by the template lines that follow
	// it (which may use $now).
	statusPatch = `  steps:
  - patch:
      subresource: status
      root: status
      template: |
        {{ $now := Now }}
`
	// unreadyContainers: opens each container's status, neither ready nor started; the template
	// goes on with its restartCount and state, then ends the range.
	unreadyContainers = `        containerStatuses:
        {{ range .spec.containers }}
        - image: {{ .image | Quote }}
          name: {{ .name | Quote }}
          ready: false
          started: false
`
	// unreadyConditions: the pod's conditions while its containers are not ready (needs $now).
	unreadyConditions = `        {{ $names := list }}
        {{ range .spec.containers }}{{ $names = append $names .name }}{{ end }}
        {{ $unready := printf "containers with unready status: [%s]" ( join " " $names ) }}
        conditions:
        - lastTransitionTime: {{ $now | Quote }}
          status: "True"
          type: Initialized
        - lastTransitionTime: {{ $now | Quote }}
          message: {{ $unready | Quote }}
          reason: ContainersNotReady
          status: "False"
          type: Ready
        - lastTransitionTime: {{ $now | Quote }}
          message: {{ $unready | Quote }}
          reason: ContainersNotReady
          status: "False"
          type: ContainersReady
`
	// hostIPsStatus: the pod's host IPs, those of its node as kwok knows them.
	hostIPsStatus = `        {{ $hostIPs := NodeIPsWith .spec.nodeName }}
        {{ with $hostIPs }}
        hostIP: {{ index . 0 | Quote }}
        hostIPs:
        {{ range . }}
        - ip: {{ . | Quote }}
        {{ end }}
        {{ end }}
`
)

// ephemeralContainersStage reports a running pod's ephemeral containers as running, as a
// kubelet does once it started them: kwok's fast stages never write ephemeralContainerStatuses,
// and the SSH proxy waits for its relay container to run before it execs into it. It matches a
// running pod with more ephemeral containers than statuses of them; afterwards the counts agree
// and the pod matches no stage of ours again.
var ephemeralContainersStage = podStage("localkube-pod-ephemeral-containers-running", `    matchExpressions:
`+notDeleted+`    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '( .spec.ephemeralContainers // [] | length ) > ( .status.ephemeralContainerStatuses // [] | length )'
      operator: 'In'
      values:
      - 'true'
`, statusPatch+`        ephemeralContainerStatuses:
        {{ range .spec.ephemeralContainers }}
        - image: {{ .image | Quote }}
          name: {{ .name | Quote }}
          ready: false
          restartCount: 0
          state:
            running:
              startedAt: {{ $now | Quote }}
        {{ end }}
`)
