package store_test

import (
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// lrpEvents records the handlers FollowLRPs registers and removes.
type lrpEvents struct {
	workloads, pods cache.ResourceEventHandler
	podsRefused     error
	removed         []string
}

type registration struct {
	cache.ResourceEventHandlerRegistration
	name string
}

func (e *lrpEvents) AddWorkloadHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	e.workloads = h
	return registration{name: "workloads"}, nil
}

func (e *lrpEvents) RemoveWorkloadHandler(r cache.ResourceEventHandlerRegistration) error {
	e.removed = append(e.removed, r.(registration).name)
	return nil
}

func (e *lrpEvents) AddPodHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	if e.podsRefused != nil {
		return nil, e.podsRefused
	}
	e.pods = h
	return registration{name: "pods"}, nil
}

func (e *lrpEvents) RemovePodHandler(r cache.ResourceEventHandlerRegistration) error {
	e.removed = append(e.removed, r.(registration).name)
	return nil
}

var _ = Describe("FollowLRPs", func() {
	labels := map[string]string{names.LabelGUID: "g", names.LabelVersion: "v"}
	pod := store.PodRecordOf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: labels}})

	It("hands over the LRP key of every workload and pod event, a deleted object's last state included, and removes both handlers on stop", func() {
		events := &lrpEvents{}
		var keys []string
		stop, err := store.FollowLRPs(events, func(key string) { keys = append(keys, key) })
		Expect(err).NotTo(HaveOccurred())

		replicas := int32(1)
		w := store.WorkloadRecordOf(&metav1.ObjectMeta{Name: "w", Labels: labels}, &replicas, &corev1.PodTemplateSpec{})
		key := pod.LRPKey()
		Expect(key).NotTo(BeEmpty())
		events.workloads.OnAdd(w, true)
		events.pods.OnUpdate(pod, pod)
		events.pods.OnDelete(cache.DeletedFinalStateUnknown{Key: "apps/p", Obj: pod})
		events.pods.OnAdd(&store.PodRecord{}, false) // no LRP labels: no key
		Expect(keys).To(Equal([]string{key, key, key}))
		Expect(store.LRPFromKey(key)).To(Equal(opi.LRPIdentifier{GUID: "g", Version: "v"}))

		stop()
		Expect(events.removed).To(ConsistOf("workloads", "pods"))
	})

	It("leaves no handler registered when one cannot be added", func() {
		events := &lrpEvents{podsRefused: errors.New("informer stopped")}
		_, err := store.FollowLRPs(events, func(string) {})
		Expect(err).To(MatchError(ContainSubstring("following the pods: informer stopped")))
		Expect(events.removed).To(Equal([]string{"workloads"}))
	})
})
