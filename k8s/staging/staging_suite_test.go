package staging_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"sync"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
)

func TestStaging(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "K8s Staging Suite")
}

var _ = BeforeSuite(func() {
	// client-go's reflectors log through klog; keep that in the spec output, not on stderr.
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	Expect(flags.Set("logtostderr", "false")).To(Succeed())
	Expect(flags.Set("stderrthreshold", "FATAL")).To(Succeed())
	klog.SetOutput(GinkgoWriter)
})

const namespace = "cf-apps"

// newClient is a fake clientset that, like an API server, gives created objects a UID and
// every write a new resource version (the plain fake leaves them empty, and the record's
// delete is conditional on its UID), applying merge patches itself so that they get one too.
func newClient() *fake.Clientset {
	client := fake.NewClientset()
	var mu sync.Mutex
	next := 1000
	stamp := func(action k8stesting.Action) (bool, runtime.Object, error) {
		var obj runtime.Object
		switch a := action.(type) {
		case k8stesting.CreateAction:
			obj = a.GetObject()
		case k8stesting.UpdateAction:
			obj = a.GetObject()
		default:
			return false, nil, nil
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		next++
		if action.GetVerb() == "create" && m.GetUID() == "" {
			m.SetUID(types.UID(fmt.Sprintf("uid-%d", next)))
		}
		m.SetResourceVersion(strconv.Itoa(next))
		return false, nil, nil
	}
	client.PrependReactor("create", "*", stamp)
	client.PrependReactor("update", "*", stamp)
	client.PrependReactor("patch", "secrets", func(action k8stesting.Action) (bool, runtime.Object, error) {
		pa := action.(k8stesting.PatchAction)
		if pa.GetPatchType() != types.MergePatchType {
			return false, nil, nil
		}
		current, err := client.Tracker().Get(pa.GetResource(), pa.GetNamespace(), pa.GetName())
		if err != nil {
			return true, nil, err
		}
		original, err := json.Marshal(current)
		if err != nil {
			return true, nil, err
		}
		patched, err := jsonpatch.MergePatch(original, pa.GetPatch())
		if err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		obj := &corev1.Secret{}
		if err := json.Unmarshal(patched, obj); err != nil {
			return true, nil, err
		}
		mu.Lock()
		next++
		obj.ResourceVersion = strconv.Itoa(next)
		mu.Unlock()
		if err := client.Tracker().Update(pa.GetResource(), obj, pa.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	})
	return client
}

// actionsSince describes the client's actions from index from on, as "verb resource name",
// watches and lists excluded.
func actionsSince(client *fake.Clientset, from int) []string {
	var out []string
	for _, a := range client.Actions()[from:] {
		var name string
		switch act := a.(type) {
		case k8stesting.CreateAction:
			if m, err := meta.Accessor(act.GetObject()); err == nil {
				name = m.GetName()
			}
		case k8stesting.UpdateAction:
			if m, err := meta.Accessor(act.GetObject()); err == nil {
				name = m.GetName()
			}
		case k8stesting.GetAction:
			name = act.GetName()
		case k8stesting.DeleteAction:
			name = act.GetName()
		case k8stesting.PatchAction:
			name = act.GetName()
		default:
			continue
		}
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource+" "+name)
	}
	return out
}

func getSecret(client *fake.Clientset, name string) *corev1.Secret {
	s, err := client.CoreV1().Secrets(namespace).Get(context.Background(), name, metav1.GetOptions{})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return s
}
