package lrp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"code.cloudfoundry.org/lager/v3"
	corev1 "k8s.io/api/core/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/k8s/internal/kube"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/internal/workload"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// DesireLRP creates the LRP's objects in two rounds, so that a desire costs two API round
// trips one after the other however many objects the LRP has, and in routing modes whose hooks
// write nothing at a desire (nats), one:
//
//  1. at once: the workload, a Deployment or StatefulSet (the kind's), shaped by the hooks
//     (exists → the desire changes nothing of it), and its Secrets (the env Secret, and the
//     image pull Secret when the LRP has registry credentials), created owned by nothing;
//  2. once the workload is known, at once, each created controlled by the workload (its owner
//     reference set at creation, so no owner patch follows): every hook's objects (the
//     Service, routing objects, egress policy, PodDisruptionBudget: see package hooks). An
//     object that exists is made controlled by the workload (kube.EnsureControlled) and its
//     content left.
//
// The Secrets are not owned by the workload, because an owner reference needs the workload's
// uid, which only its create returns: waiting for it was a second create after the first, on
// every desire. Since nothing owns them, StopLRP deletes them by name with the workload, and the
// janitor deletes one whose LRP has no workload once it is older than its grace (a kubectl
// delete of the workload, opi killed between the calls of a stop). A Secret that exists is the
// one case in which round 1 waits for the workload. One still owned by a workload that a stop
// deleted just before is made again, controlled by the new one, so that the garbage collector
// does not delete it under the new workload. One owned by nothing is left as it is when the
// workload existed before this desire (a repeated desire changes nothing,
// kube.EnsureFreeOrControlled); when this desire created the workload, it gets the workload as
// owner by a patch (kube.EnsureControlled), which also changes its version, so that the
// janitor's delete of what it listed as a leftover (the Secret of a workload gone, past the
// grace; conditional on that version) cannot take it from under the new workload.
//
// Every object is built first, from one identity (objects.ForDesire, the kind's Build), and
// nothing is read before it is created, so a first desire costs one call per object. A later
// desire finishes what an interrupted one started (opi may die between any two calls): the
// objects that are missing are created. A workload that no desire completes (opi killed with
// its Secret's create in flight and CC never desiring the LRP again) cannot start without its
// env Secret, whose content only CC has: the janitor deletes it once it is older than its
// grace, so that CC's next sync sees the LRP missing and desires it again (see Sweep). Round 2
// and a Secret that exists use kube.EnsureControlled, so that a desire racing a stop and
// another desire of the same LRP never leaves the live workload without a Secret or a hook's
// object: one holding a workload that the stop deleted meanwhile gives up there, and what it
// created with that owner is the garbage collector's. A Secret a desire creates after a racing
// stop deleted the workload and its Secrets is owned by nothing and left to the janitor.
//
// Before round 1 every hook checks the LRP (an isolation segment, volume claims, routes it
// cannot serve) and the objects are checked against the API server's rules (preflight): a desire
// Kubernetes would refuse writes nothing. A refusal that no check can foresee (an admission
// webhook, a quota) in either round undoes what this desire created (see undoDesire) and is
// answered as opi.ErrInvalid with Kubernetes' reason.
func (s *Service) DesireLRP(ctx context.Context, lrp *opi.LRP) error {
	logger := s.logger.Session("desire-lrp", lager.Data{"process-guid": lrp.ProcessGUID()})
	if err := s.cache.CheckWritable(ctx); err != nil {
		return err
	}
	d, err := objects.ForDesire(lrp, s.namespace, s.pods)
	if err != nil {
		return err
	}
	want := s.kind.Build(&d)
	if err := s.hooks.Prepare(ctx, lrp, want.Meta, want.Template); err != nil {
		logger.Info("refused-before-writing", lager.Data{"reason": err.Error()})
		return err
	}
	if err := preflight(d.Secrets, want, d.ServiceMeta); err != nil {
		logger.Info("refused-before-writing", lager.Data{"reason": err.Error()})
		return err
	}

	// The wait for the cache to hold the workload (so that a read after the answer sees the
	// LRP) starts as soon as the workload is known and runs beside the other writes rather
	// than after them: under load the watch event of a create comes as late as the writes
	// take, and waiting for one after the other added them up. A refusal ends the wait; the
	// answer still waits for both.
	waitCtx, endWait := context.WithCancel(ctx)
	defer endWait()
	waited := make(chan error, 1)

	// Round 1: the workload and its Secrets, all at once.
	start := time.Now()
	var undo desireWrites
	var (
		w       metav1.Object
		created bool // by this desire
		ours    bool // w is this LRP's live workload: the Secrets that exist may be completed
	)
	known := make(chan struct{}) // closed once the workload's step has ended
	round1 := make([]func() (raw, answer error), 0, 1+len(d.Secrets))
	round1 = append(round1, func() (error, error) {
		defer close(known)
		got, gotCreated, err := s.kind.Create(ctx, want)
		if err != nil {
			return err, kube.Refusal(err, "create "+s.kindName())
		}
		if err := s.checkSameLRP(got, lrp.LRPIdentifier); err != nil {
			return err, err
		}
		w, created, ours = got, gotCreated, true
		if created {
			undo.workload = w
		}
		go func() { waited <- s.cache.WaitForWorkload(waitCtx, logger, got, false, s.liveCheck(got)) }()
		return nil, nil
	})
	secrets := s.client.CoreV1().Secrets(s.namespace)
	for i, secret := range d.Secrets {
		round1 = append(round1, func() (error, error) {
			createdSecret, isNew, err := kube.CreateIfAbsent(ctx, secrets, secret.DeepCopy())
			if err != nil {
				return err, kube.Refusal(err, secretSteps[i])
			}
			if isNew {
				undo.addSecret(createdSecret)
				return nil, nil
			}
			<-known
			if !ours {
				return nil, nil
			}
			if created {
				err = kube.EnsureControlled(ctx, secrets, secret.DeepCopy(), nil, s.controllerRef(w), s.liveCheck(w))
			} else {
				// The LRP was there before: its Secret owned by nothing is as a desire left it.
				err = kube.EnsureFreeOrControlled(ctx, secrets, secret.DeepCopy(), s.controllerRef(w), s.liveCheck(w))
			}
			if err != nil {
				return err, kube.OwnershipError(logger, err, secretSteps[i])
			}
			return nil, nil
		})
	}
	raw, answer := inParallel(round1)
	if ours && !created {
		// The Secrets this desire created complete an LRP that was there before it: an undo
		// leaves them, as it leaves the workload.
		undo.forgetSecrets()
	}
	if answer != nil {
		endWait()
		return s.refused(ctx, logger, &undo, raw, answer)
	}

	// Round 2: what the workload controls, all at once.
	target := hooks.Target{LRP: lrp, Name: w.GetName(), Namespace: s.namespace, Owner: s.controllerRef(w), Live: s.liveCheck(w)}
	steps := make([]func() (raw, answer error), 0, len(s.hooks))
	for _, h := range s.hooks.Desirers() {
		steps = append(steps, func() (error, error) {
			if err := h.Desired(ctx, target); err != nil {
				return err, s.hookError(logger, err, h.Name())
			}
			return nil, nil
		})
	}
	if raw, answer := inParallel(steps); answer != nil {
		endWait()
		return s.refused(ctx, logger, &undo, raw, answer)
	}
	written := time.Since(start)
	if err := <-waited; err != nil {
		return err
	}
	// How long the writes took, and when the cache held the workload (both from round 1's
	// start): what a desire waits for beyond its writes is the watch's delay.
	logger.Info("desired", lager.Data{s.kindName(): w.GetName(), "created": created,
		"writes-ms": written.Milliseconds(), "seen-ms": time.Since(start).Milliseconds()})
	return nil
}

// secretSteps name the writes of objects.Desire's Secrets, in their order, for what a failed
// one answers.
var secretSteps = []string{"create env secret", "create registry secret"}

// inParallel runs each step in its own goroutine and waits for all. Each step returns the
// raw error of its failed call and the error to answer with (nil, nil: done, or nothing left
// to do). It returns the first refusal among them (see isRefusal), so that what the desire
// wrote is undone; else the first failure.
func inParallel(steps []func() (raw, answer error)) (raw, answer error) {
	type result struct{ raw, answer error }
	results := make([]result, len(steps))
	var wg sync.WaitGroup
	for i, step := range steps {
		wg.Go(func() {
			r, a := step()
			results[i] = result{r, a}
		})
	}
	wg.Wait()
	var first *result
	for i := range results {
		r := &results[i]
		if r.answer == nil {
			continue
		}
		if kube.IsRefusal(r.raw) {
			return r.raw, r.answer
		}
		if first == nil {
			first = r
		}
	}
	if first == nil {
		return nil, nil
	}
	return first.raw, first.answer
}

// errNotThisLRP says the workload of an LRP's name belongs to another LRP.
var errNotThisLRP = errors.New("exists and does not belong to this lrp")

// checkSameLRP guards against touching a workload of the same name that is not this LRP's,
// or one that is going away.
func (s *Service) checkSameLRP(w metav1.Object, id opi.LRPIdentifier) error {
	if w.GetLabels()[names.LabelGUID] != id.GUID || w.GetLabels()[names.LabelVersion] != id.Version {
		return fmt.Errorf("create %s: %s %w", s.kindName(), w.GetName(), errNotThisLRP)
	}
	if w.GetDeletionTimestamp() != nil {
		return fmt.Errorf("create %s: %w: %s is being deleted, retry later", s.kindName(), opi.ErrUnavailable, w.GetName())
	}
	return nil
}

// maxObjectBytes bounds the encoded size of an object opi creates. etcd refuses requests above
// 1.5 MiB by default, and the stored object also carries its managed fields (about the size of
// the spec's field names again), so 1 MiB of spec keeps a safe distance.
const maxObjectBytes = 1 << 20

// preflight runs, before a desire's first write, the checks the API server would run on what
// opi derived from the request (names, labels, annotations, a Secret's size, an object's size),
// with the validation functions apimachinery publishes. bifrost has checked the request's own
// fields by the same rules; this catches what only the assembled objects show (opi's own
// annotations, say, made too large by a long app name or many routes), so that a desire
// Kubernetes would refuse halfway is refused whole. serviceMeta is the Service's metadata, if
// the LRP gets one.
func preflight(secrets []*corev1.Secret, w workload.Object, serviceMeta *metav1.ObjectMeta) error {
	for _, s := range secrets {
		errs := apimachineryvalidation.ValidateObjectMeta(&s.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
		total := 0
		for key, value := range s.Data {
			for _, msg := range validation.IsConfigMapKey(key) {
				errs = append(errs, field.Invalid(field.NewPath("data"), key, msg))
			}
			total += len(value)
		}
		if total > corev1.MaxSecretSize {
			errs = append(errs, field.TooLong(field.NewPath("data"), "", corev1.MaxSecretSize))
		}
		if err := refusedObject("secret", s.Name, errs); err != nil {
			return err
		}
	}

	errs := apimachineryvalidation.ValidateObjectMeta(w.Meta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	template := field.NewPath("spec", "template", "metadata")
	errs = append(errs, metav1validation.ValidateLabels(w.Template.Labels, template.Child("labels"))...)
	errs = append(errs, apimachineryvalidation.ValidateAnnotations(w.Template.Annotations, template.Child("annotations"))...)
	if size := w.Size(); size > maxObjectBytes {
		errs = append(errs, field.TooLong(field.NewPath("(encoded object)"), "", maxObjectBytes))
	}
	if err := refusedObject(w.Kind, w.Meta.Name, errs); err != nil {
		return err
	}

	if serviceMeta != nil {
		errs := apimachineryvalidation.ValidateObjectMeta(serviceMeta, true, apimachineryvalidation.NameIsDNS1035Label, field.NewPath("metadata"))
		if err := refusedObject("service", serviceMeta.Name, errs); err != nil {
			return err
		}
	}
	return nil
}

// refusedObject is nil without errors, else an opi.ErrInvalid naming the object and the first
// rule it breaks (the others usually follow from it).
func refusedObject(kind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the %s %s would break a rule of Kubernetes: %s", opi.ErrInvalid, kind, name, errs[0].Error())
}
