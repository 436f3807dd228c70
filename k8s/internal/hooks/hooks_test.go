package hooks_test

import (
	"context"
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/k8s/internal/hooks"
	"github.com/opi-bridge/opi/opi"
)

const namespace = "cf-workloads"

// recorder is a hook with every event; each call is written to calls as "<name> <event>".
type recorder struct {
	name  string
	calls *[]string
	// fail makes Check and Updated fail with it.
	fail error
}

func (r *recorder) Name() string { return r.name }
func (r *recorder) Start(context.Context) error {
	*r.calls = append(*r.calls, r.name+" start")
	return nil
}
func (r *recorder) Check(context.Context, *opi.LRP) error {
	*r.calls = append(*r.calls, r.name+" check")
	return r.fail
}
func (r *recorder) Shape(_ *opi.LRP, meta *metav1.ObjectMeta, _ *corev1.PodTemplateSpec) {
	*r.calls = append(*r.calls, r.name+" shape")
	if meta.Labels == nil {
		meta.Labels = map[string]string{}
	}
	meta.Labels[r.name] = "shaped"
}
func (r *recorder) Desired(context.Context, hooks.Target) error {
	*r.calls = append(*r.calls, r.name+" desired")
	return nil
}
func (r *recorder) Updated(context.Context, hooks.Target, *opi.LRP, opi.LRPUpdate) error {
	*r.calls = append(*r.calls, r.name+" updated")
	return r.fail
}
func (r *recorder) Missing(_ context.Context, w []hooks.Workload) ([]hooks.Workload, error) {
	return w, nil
}

// checkOnly reacts to Check only.
type checkOnly struct {
	calls *[]string
}

func (c checkOnly) Name() string { return "check-only" }
func (c checkOnly) Check(context.Context, *opi.LRP) error {
	*c.calls = append(*c.calls, "check-only check")
	return nil
}

func hookNames[T hooks.Hook](hs []T) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Name())
	}
	return out
}

var _ = Describe("a hook set", func() {
	var (
		calls []string
		set   hooks.Set
	)
	BeforeEach(func() {
		calls = nil
		set = hooks.Set{
			&recorder{name: "first", calls: &calls},
			hooks.Off("switched-off"),
			checkOnly{calls: &calls},
			&recorder{name: "last", calls: &calls},
		}
	})

	It("asks each hook only for the events it implements, in registration order", func() {
		Expect(set.Check(context.Background(), &opi.LRP{})).To(Succeed())
		meta := &metav1.ObjectMeta{}
		set.Shape(&opi.LRP{}, meta, &corev1.PodTemplateSpec{})
		name, err := set.Updated(context.Background(), hooks.Target{}, &opi.LRP{}, opi.LRPUpdate{})
		Expect(err).NotTo(HaveOccurred())
		Expect(name).To(BeEmpty())

		Expect(calls).To(Equal([]string{
			"first check", "check-only check", "last check",
			"first shape", "last shape",
			"first updated", "last updated",
		}))
		Expect(meta.Labels).To(Equal(map[string]string{"first": "shaped", "last": "shaped"}))
		Expect(hookNames(set.Starters())).To(Equal([]string{"first", "last"}))
		Expect(hookNames(set.Desirers())).To(Equal([]string{"first", "last"}))
		Expect(hookNames(set.Janitors())).To(Equal([]string{"first", "last"}))
	})

	It("stops at the first refusal of a check, which is the answer", func() {
		refused := errors.New("no")
		set[0].(*recorder).fail = refused
		Expect(set.Check(context.Background(), &opi.LRP{})).To(MatchError(refused))
		Expect(calls).To(Equal([]string{"first check"}))
	})

	It("stops at the first failed update and names its hook", func() {
		failed := errors.New("write failed")
		set[3].(*recorder).fail = failed
		set = append(set, &recorder{name: "after", calls: &calls})
		name, err := set.Updated(context.Background(), hooks.Target{}, &opi.LRP{}, opi.LRPUpdate{})
		Expect(err).To(MatchError(failed))
		Expect(name).To(Equal("last"))
		Expect(calls).To(Equal([]string{"first updated", "last updated"}))
	})

	It("gives a switched-off concern its name and no event", func() {
		Expect(hooks.Off("routing").Name()).To(Equal("routing"))
		Expect(hooks.Set{hooks.Off("routing")}.Starters()).To(BeEmpty())
		Expect(hooks.Set{hooks.Off("routing")}.Desirers()).To(BeEmpty())
	})
})

var _ = Describe("Without", func() {
	It("keeps the workloads that are not complete, in order", func() {
		ws := []hooks.Workload{record{"a", 1}, record{"b", 2}, record{"c", 3}}
		out := hooks.Without(ws, func(w hooks.Workload) bool { return w.Replicas() == 2 })
		Expect(out).To(Equal([]hooks.Workload{record{"a", 1}, record{"c", 3}}))
	})
})

// record is a hooks.Workload with a name and replicas.
type record struct {
	name     string
	replicas int32
}

func (r record) GetName() string    { return r.name }
func (r record) Replicas() int32    { return r.replicas }
func (r record) HasPorts() bool     { return false }
func (r record) EgressJSON() string { return "" }
func (r record) RoutesJSON() string { return "" }
func (r record) LRP() *opi.LRP      { return &opi.LRP{} }
