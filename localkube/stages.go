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
// by build.sh).
//
// Why it wins over kwok's pod-ready: kwok collects every stage whose selector matches a pod and,
// when more than one does, picks one at random in proportion to `weight`, leaving out stages of
// weight 0 whenever the total is positive (sigs.k8s.io/kwok/pkg/utils/lifecycle Lifecycle.Match).
// The fast pod-ready stage has no weight (0) and this one has 1, so for an annotated pod this
// stage is chosen every time. It matches the same pods pod-ready does (Pending, not yet Ready, not
// being deleted) plus the annotation; afterwards the pod is Running, which no fast stage matches
// except pod-delete (on deletion), so the status stays as written.
const crashStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: localkube-pod-crash-loop-back-off
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchAnnotations:
      ` + CrashAnnotation + `: "true"
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Pending'
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values:
      - 'True'
  weight: 1
  steps:
  - patch:
      subresource: status
      root: status
      template: |
        {{ $now := Now }}
        {{ $pod := .metadata }}
` + unreadyConditions + `        containerStatuses:
        {{ range .spec.containers }}
        - image: {{ .image | Quote }}
          name: {{ .name | Quote }}
          ready: false
          started: false
          restartCount: 1
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
` + hostIPsStatus + `        {{ $podIPs := PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
        {{ with $podIPs }}
        podIP: {{ index . 0 | Quote }}
        podIPs:
        {{ range . }}
        - ip: {{ . | Quote }}
        {{ end }}
        {{ end }}
        phase: Running
        startTime: {{ $now | Quote }}
`

// UnpullableImage is the text that makes an image unpullable on the simulated kubelet: a pod
// whose container image contains it is reported as a kubelet reports an image it cannot pull
// (container waiting in ImagePullBackOff), e.g. "registry.example.com/does-not-exist:1".
const UnpullableImage = "does-not-exist"

// imagePullStage is our kwok Stage for UnpullableImage, chosen over kwok's pod-ready for the
// same reason as crashStage (weight 1). A real kubelet leaves such a pod in phase Pending; kwok
// would then start it with pod-ready on the next event, so the stage reports phase Running (no
// fast stage matches a Running pod but pod-delete) with the container waiting: opi's instance
// state does not depend on the phase for a waiting reason.
const imagePullStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: localkube-pod-image-pull-back-off
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.spec.containers.[] | select( .image | contains("` + UnpullableImage + `") ) | .image'
      operator: 'Exists'
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Pending'
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values:
      - 'True'
  weight: 1
  steps:
  - patch:
      subresource: status
      root: status
      template: |
        {{ $now := Now }}
` + unreadyConditions + `        containerStatuses:
        {{ range .spec.containers }}
        - image: {{ .image | Quote }}
          name: {{ .name | Quote }}
          ready: false
          started: false
          restartCount: 0
          state:
            waiting:
              reason: ImagePullBackOff
              message: {{ printf "Back-off pulling image %q" .image | Quote }}
        {{ end }}
` + hostIPsStatus + `        phase: Running
        startTime: {{ $now | Quote }}
`

// TaskSourceLabel marks the pods of opi's tasks; the task stages below act only on them.
const TaskSourceLabel = "opi-bridge.io/source-type"

// taskCommand is the jq query kwok matches a task pod's command with: true for
// ["/bin/sh","-c","exit N"].
const taskCommand = `.spec.containers.[0].command | join(" ") | test("^/bin/sh -c exit [0-9]+$")`

// taskStages end the pods of tasks, since no container runs here: a running task pod whose first
// container's command is ["/bin/sh","-c","exit N"] terminates with exit code N (phase Succeeded
// with reason Completed for 0, else Failed with reason Error), and any other task pod keeps
// running (a cancel can then stop it). Both have weight 1, so they win over kwok's fast
// pod-complete stage (weight 0), which would otherwise complete every pod owned by a Job at once
// (see crashStage on how kwok picks).
const taskStages = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: localkube-task-pod-exit
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchLabels:
      ` + TaskSourceLabel + `: TASK
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '` + taskCommand + `'
      operator: 'In'
      values:
      - 'true'
  weight: 1
  steps:
  - patch:
      subresource: status
      root: status
      template: |
        {{ $now := Now }}
        {{ $code := index ( index .spec.containers 0 ).command 2 | trimPrefix "exit " | atoi }}
        conditions:
        - lastTransitionTime: {{ $now | Quote }}
          status: "False"
          reason: PodCompleted
          type: Ready
        - lastTransitionTime: {{ $now | Quote }}
          status: "False"
          reason: PodCompleted
          type: ContainersReady
        containerStatuses:
        {{ range .spec.containers }}
        - image: {{ .image | Quote }}
          name: {{ .name | Quote }}
          ready: false
          started: false
          restartCount: 0
          state:
            terminated:
              exitCode: {{ $code }}
              reason: {{ if eq $code 0 }}Completed{{ else }}Error{{ end }}
              startedAt: {{ $now | Quote }}
              finishedAt: {{ $now | Quote }}
        {{ end }}
        phase: {{ if eq $code 0 }}Succeeded{{ else }}Failed{{ end }}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: localkube-task-pod-keep-running
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchLabels:
      ` + TaskSourceLabel + `: TASK
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '` + taskCommand + `'
      operator: 'NotIn'
      values:
      - 'true'
  weight: 1
`

// The parts of the stages' status templates that every one writes alike (each a whole number
// of template lines, indented for a stage's status patch).
const (
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
