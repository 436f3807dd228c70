package names

import "fmt"

// Labels and annotations a hook or a reporter writes that the read path decodes again: they
// live here, below the store, so that the store never imports a hook (k8s/README.md, rule 4).

// LabelPlacementTag is the pods' isolation segment (written by the placement hook), so that an
// instance its segment cannot place reads back with Diego's placement error. (A label, not an
// annotation: the pod template's annotations are CC's user-defined ones, read back as such.)
const LabelPlacementTag = "opi-bridge.io/placement-tag"

// PlacementTagError is Diego's placement error for a segment without a cell that fits.
func PlacementTagError(tag string) string {
	return fmt.Sprintf("found no compatible cell with placement tag %q", tag)
}

// AnnotationCrashesReported is on a pod of an LRP once a crash of it was reported to Cloud
// Controller: the crash count last reported. The crash reporter compares it with the pod's
// crash count, so a restarted opi or a new leader reports only what is still missing.
const AnnotationCrashesReported = AnnotationPrefix + "crashes-reported"
