package apiclient_test

import (
	"context"
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/apiclient"
)

var _ = Describe("ListPages", func() {
	pages := map[string]*corev1.SecretList{
		"":   {ListMeta: metav1.ListMeta{Continue: "p2"}, Items: []corev1.Secret{*secret("a"), *secret("b")}},
		"p2": {ListMeta: metav1.ListMeta{Continue: "p3"}, Items: []corev1.Secret{*secret("c")}},
		"p3": {Items: []corev1.Secret{*secret("d")}},
	}

	It("follows the continue token with bounded pages and the caller's selector", func() {
		var asked []metav1.ListOptions
		list := func(_ context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
			asked = append(asked, opts)
			return pages[opts.Continue], nil
		}
		var names []string
		err := apiclient.ListPages(context.Background(), metav1.ListOptions{LabelSelector: "x=y"}, list, func(page *corev1.SecretList) error {
			for _, s := range page.Items {
				names = append(names, s.Name)
			}
			return nil
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(names).To(Equal([]string{"a", "b", "c", "d"}))
		Expect(asked).To(HaveLen(3))
		for _, o := range asked {
			Expect(o.Limit).To(BeEquivalentTo(apiclient.PageSize))
			Expect(o.LabelSelector).To(Equal("x=y"))
		}
		Expect(asked[1].Continue).To(Equal("p2"))
	})

	It("stops at the first error", func() {
		boom := errors.New("boom")
		calls := 0
		list := func(_ context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
			calls++
			if opts.Continue == "p2" {
				return nil, boom
			}
			return pages[opts.Continue], nil
		}
		err := apiclient.ListPages(context.Background(), metav1.ListOptions{}, list, func(*corev1.SecretList) error { return nil })
		Expect(err).To(MatchError(boom))
		Expect(calls).To(Equal(2))
	})

	It("names every object of every page (ListNames)", func() {
		list := func(_ context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
			return pages[opts.Continue], nil
		}
		names, err := apiclient.ListNames(context.Background(), metav1.ListOptions{}, list)
		Expect(err).NotTo(HaveOccurred())
		Expect(names).To(Equal(map[string]bool{"a": true, "b": true, "c": true, "d": true}))
	})
})

func secret(name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
}
