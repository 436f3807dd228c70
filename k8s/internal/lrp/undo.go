package lrp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"code.cloudfoundry.org/lager/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/internal/kube"
)

// undoTimeout bounds the clean-up after a refusal; it runs even when the request's own deadline
// has passed, since what it removes would otherwise linger until the janitor's grace.
const undoTimeout = 10 * time.Second

// desireWrites is what one desire created itself, so that a refusal at a later step can remove
// exactly that: never an object that existed before, nor one another writer changed since.
// Secrets are added from the desire's parallel steps.
type desireWrites struct {
	mu sync.Mutex
	// secrets as their create returned them (owned by nothing: see DesireLRP).
	secrets []*corev1.Secret
	// workload (Deployment or StatefulSet), when this desire created it.
	workload metav1.Object
}

// addSecret records a Secret this desire created.
func (w *desireWrites) addSecret(s *corev1.Secret) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.secrets = append(w.secrets, s)
}

// forgetSecrets leaves the Secrets recorded so far out of an undo.
func (w *desireWrites) forgetSecrets() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.secrets = nil
}

// refused is the answer to a desire whose step failed with raw (wrapped: what to answer).
// When Kubernetes refused the step, or the workload of the LRP's name is another LRP's, what
// this desire created is removed first and the answer says so; other failures (unavailable,
// contention) leave everything for a retry to complete.
func (s *Service) refused(ctx context.Context, logger lager.Logger, w *desireWrites, raw, wrapped error) error {
	if !kube.IsRefusal(raw) && !errors.Is(raw, errNotThisLRP) {
		return wrapped
	}
	removed, err := s.undoDesire(ctx, logger, w)
	if err != nil {
		logger.Error("undo-failed", err, lager.Data{"removed": removed})
		return fmt.Errorf("%w; removing what this desire wrote failed: %w", wrapped, err)
	}
	logger.Info("refused-and-undone", lager.Data{"reason": wrapped.Error(), "removed": removed})
	if len(removed) == 0 {
		return wrapped
	}
	return fmt.Errorf("%w; removed what this desire had written (%s)", wrapped, strings.Join(removed, ", "))
}

// undoDesire deletes what w records, the workload first (background propagation, as a stop),
// each delete conditional on the object being the one this desire created (its uid). Nothing
// owns the Secrets (see DesireLRP): deleting them here means no credential of a refused desire
// outlives the answer. The hooks' objects made in the same
// round are controlled by the workload and go with it (the garbage collector's work). It returns what it removed, and waits
// until the cache no longer holds the workload, so that reads after the answer do not list it.
func (s *Service) undoDesire(ctx context.Context, logger lager.Logger, w *desireWrites) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	var removed []string
	var errs []error
	gone := false // the workload deleted, or no longer this desire's
	if d := w.workload; d != nil {
		opts := kube.InBackground(kube.PreconditionUID(d))
		switch err := s.kind.Delete(ctx, d.GetName(), opts); {
		case err == nil:
			removed = append(removed, s.kindName()+" "+d.GetName())
			gone = true
		case kube.GoneOrChanged(err):
			gone = true
		default:
			errs = append(errs, fmt.Errorf("delete %s %s: %w", s.kindName(), d.GetName(), err))
		}
	}
	secrets := s.client.CoreV1().Secrets(s.namespace)
	w.mu.Lock()
	created := append([]*corev1.Secret(nil), w.secrets...)
	w.mu.Unlock()
	for i := len(created) - 1; i >= 0; i-- {
		secret := created[i]
		switch err := secrets.Delete(ctx, secret.Name, kube.PreconditionUID(secret)); {
		case err == nil:
			removed = append(removed, "secret "+secret.Name)
		case !kube.GoneOrChanged(err):
			errs = append(errs, fmt.Errorf("delete secret %s: %w", secret.Name, err))
		}
	}
	if d := w.workload; d != nil && gone {
		// A timeout is logged: the refusal is the answer either way. A workload whose delete
		// failed is not waited for: the cache would show it until the undo's timeout.
		_ = s.cache.WaitForWorkloadGone(ctx, logger, d.GetName(), d.GetUID())
	}
	return removed, errors.Join(errs...)
}
