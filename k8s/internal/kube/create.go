package kube

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Creator is the create call of a typed client-go client (e.g. SecretInterface).
type Creator[T any] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
}

// Getter is the get call of a typed client-go client.
type Getter[T any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
}

// CreateGetter creates and gets one kind of object.
type CreateGetter[T any] interface {
	Creator[T]
	Getter[T]
}

// CreateIfAbsent creates obj and takes an existing object of the same name as success,
// without reading it. created says whether this call made it; result is the created object
// (the zero value when it existed).
func CreateIfAbsent[T any](ctx context.Context, c Creator[T], obj T) (result T, created bool, err error) {
	result, err = c.Create(ctx, obj, metav1.CreateOptions{})
	if err == nil {
		return result, true, nil
	}
	var zero T
	if apierrors.IsAlreadyExists(err) {
		return zero, false, nil
	}
	return zero, false, err
}

// CreateOrGet creates obj; when an object of that name exists it returns that one instead,
// read from cached when it has it (no API call) and from the API otherwise. It never reads
// before creating: the common path is one call. cached may be nil. An object that is deleted
// between the create and the read is created again (a few times at most).
func CreateOrGet[T metav1.Object](ctx context.Context, c CreateGetter[T], obj T, cached func(name string) (T, bool)) (result T, created bool, err error) {
	var zero T
	for attempt := 1; ; attempt++ {
		result, err = c.Create(ctx, obj, metav1.CreateOptions{})
		if err == nil {
			return result, true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return zero, false, err
		}
		if cached != nil {
			if existing, ok := cached(obj.GetName()); ok {
				return existing, false, nil
			}
		}
		existing, err := c.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) && attempt < 3 {
			continue
		}
		if err != nil {
			return zero, false, err
		}
		return existing, false, nil
	}
}
