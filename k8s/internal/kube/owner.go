package kube

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Patcher is the patch call of a typed client-go client.
type Patcher[T any] interface {
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// ControllerRef is an owner reference that makes owner the controller of a dependent, so that
// deleting owner lets the garbage collector delete the dependent (and blocks the owner's
// foreground deletion until the dependent is gone).
func ControllerRef(owner metav1.Object, apiVersion, kind string) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion:         apiVersion,
		Kind:               kind,
		Name:               owner.GetName(),
		UID:                owner.GetUID(),
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
}

// SetOwner makes ref the only owner reference of the named object with one JSON merge patch.
// Replacing the whole list (rather than adding to it) also removes a stale controller
// reference to a deleted owner of the same name, which would otherwise make the API server
// reject a second controller. A non-empty resourceVersion makes the patch conditional: it
// fails with a conflict when the object changed since that version was read.
func SetOwner[T any](ctx context.Context, c Patcher[T], name, resourceVersion string, ref metav1.OwnerReference) (T, error) {
	meta := map[string]any{"ownerReferences": []metav1.OwnerReference{ref}}
	if resourceVersion != "" {
		meta["resourceVersion"] = resourceVersion
	}
	patch, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		var zero T
		return zero, fmt.Errorf("marshal owner patch: %w", err)
	}
	return c.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
}
