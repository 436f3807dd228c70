package lrp_test

import (
	"context"
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("API errors", func() {
	secrets := schema.GroupResource{Resource: "secrets"}

	DescribeTable("are classified into the opi sentinels",
		func(apiErr error, sentinel error) {
			client := backendtest.NewClient()
			backend := backendtest.StartBackend(client)
			client.PrependReactor("create", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apiErr
			})
			err := backend.DesireLRP(context.Background(), backendtest.SampleLRP())
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(HavePrefix("create env secret: "))
			for _, s := range []error{opi.ErrNotFound, opi.ErrInvalid, opi.ErrUnavailable} {
				Expect(errors.Is(err, s)).To(Equal(s == sentinel), s.Error())
			}
			Expect(errors.Is(err, apiErr)).To(BeTrue(), "the cause stays in the chain")
		},
		Entry("connection refused", backendtest.ConnectionRefused, opi.ErrUnavailable),
		Entry("service unavailable", apierrors.NewServiceUnavailable("etcd is down"), opi.ErrUnavailable),
		Entry("too many requests", apierrors.NewTooManyRequests("slow down", 1), opi.ErrUnavailable),
		Entry("server timeout", apierrors.NewServerTimeout(secrets, "create", 1), opi.ErrUnavailable),
		Entry("timeout", apierrors.NewTimeoutError("took too long", 1), opi.ErrUnavailable),
		Entry("deadline", context.DeadlineExceeded, opi.ErrUnavailable),
		Entry("invalid (422)", apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, "x", field.ErrorList{field.Invalid(field.NewPath("data"), "k", "bad key")}), opi.ErrInvalid),
		Entry("bad request", apierrors.NewBadRequest("nope"), opi.ErrInvalid),
		Entry("not found (namespace gone)", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "cf-apps"), opi.ErrNotFound),
		Entry("forbidden (a webhook, a quota) is a refusal of the desire", apierrors.NewForbidden(secrets, "x", errors.New("exceeded quota")), opi.ErrInvalid),
		Entry("unauthorized is none of them", apierrors.NewUnauthorized("token expired"), nil),
		Entry("internal error is none of them", apierrors.NewInternalError(errors.New("boom")), nil),
	)

	It("on stop are classified too", func() {
		client := backendtest.NewClient()
		backend := backendtest.StartBackend(client)
		client.PrependReactor("list", "deployments", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, backendtest.ConnectionRefused
		})
		Expect(backend.StopLRP(context.Background(), backendtest.SampleLRP().LRPIdentifier)).To(MatchError(opi.ErrUnavailable))
	})
})
