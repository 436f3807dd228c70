package backendtest

import (
	"context"
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/opi"
)

// UnservableRoutes are the routes every routing mode refuses (a route, and what the refusal
// says): the entries of a table whose body calls ExpectRouteRefused.
var UnservableRoutes = []TableEntry{
	Entry("a hostname that is not a DNS name", opi.Route{Hostname: "bad_host.example.com", Port: 8080}, "is not a DNS name"),
	Entry("a path with an empty segment", opi.Route{Hostname: "a.example.com//x", Port: 8080}, "path"),
	Entry("a port the LRP does not have", opi.Route{Hostname: "a.example.com", Port: 7070}, "is not one of the lrp's ports"),
	Entry("one hostname to two ports", opi.Route{Hostname: "ok.example.com", Port: 9090}, "goes to two ports"),
}

// ExpectRouteRefused desires lrp with route beside a route it can serve and asserts that the
// desire is refused as invalid, saying message, before anything is written.
func ExpectRouteRefused(client *fake.Clientset, backend *k8s.Backend, lrp *opi.LRP, route opi.Route, message string) {
	GinkgoHelper()
	lrp.Routes = []opi.Route{{Hostname: "ok.example.com", Port: 8080}, route}
	before := len(client.Actions())
	err := backend.DesireLRP(context.Background(), lrp)
	Expect(errors.Is(err, opi.ErrInvalid)).To(BeTrue(), "%v", err)
	Expect(err.Error()).To(ContainSubstring(message))
	Expect(ActionsSince(client, before)).To(BeEmpty())
}
