package cluster_test

import (
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestCluster(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "K8s Cluster Suite")
}

const namespace = "cf-apps"

var connectionRefused = &url.Error{Op: "Get", URL: "https://127.0.0.1:6443/api/v1/namespaces/cf-apps", Err: &net.OpError{
	Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED),
}}

// actions is every call made through client, as "verb resource name" ("verb resource" for
// calls without a name).
func actions(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		name := ""
		switch act := a.(type) {
		case k8stesting.CreateAction:
			if m, err := meta.Accessor(act.GetObject()); err == nil {
				name = m.GetName()
			}
		case k8stesting.GetAction:
			name = act.GetName()
		}
		if name == "" {
			out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
			continue
		}
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource+" "+name)
	}
	return out
}
