package apiclient

import (
	"context"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

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

// ListNames lists with opts page by page (ListPages) and returns the names of the objects
// listed: what a sweep needs to tell which objects exist, without holding them.
func ListNames[L interface {
	GetContinue() string
	runtime.Object
}](ctx context.Context, opts metav1.ListOptions, list func(context.Context, metav1.ListOptions) (L, error)) (map[string]bool, error) {
	names := map[string]bool{}
	err := ListPages(ctx, opts, list, func(page L) error {
		return meta.EachListItem(page, func(o runtime.Object) error {
			if m, err := meta.Accessor(o); err == nil {
				names[m.GetName()] = true
			}
			return nil
		})
	})
	return names, err
}
