package kube

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PageSize is how many objects ListPages asks for at a time.
const PageSize = 500

// ListPages lists with opts page by page (PageSize objects each, following the continue token)
// and hands each page to each, so that a LIST of thousands of objects never holds more than
// one page at a time. An error from list or each ends it.
func ListPages[L interface{ GetContinue() string }](ctx context.Context, opts metav1.ListOptions,
	list func(context.Context, metav1.ListOptions) (L, error), each func(L) error) error {
	opts.Limit = PageSize
	opts.Continue = ""
	for {
		page, err := list(ctx, opts)
		if err != nil {
			return err
		}
		if err := each(page); err != nil {
			return err
		}
		next := page.GetContinue()
		if next == "" {
			return nil
		}
		opts.Continue = next
	}
}
