package names_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

// FuzzDeploymentName: whatever app and space names CC sends, the name is a valid DNS-1035 label
// (Services need that), leaves room for ReplicaSet and pod suffixes, carries the env Secret's
// and pull Secret's suffixes within bounds, and is the same for the same LRP.
func FuzzDeploymentName(f *testing.F) {
	f.Add("2f3e8a2c-2c3e-4b1d-9c7e-0a1b2c3d4e5f", "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", "My App", "dev")
	f.Add("a", "b", "", "")
	f.Add("a", "b", "1st-app", "ñáme with ünïcode")
	f.Add("a", "b", "---", "...")
	f.Add("a", "b", "an-app-name-that-is-much-longer-than-any-kubernetes-label-can-hold-at-all", "space")
	f.Fuzz(func(t *testing.T, guid, version, appName, spaceName string) {
		lrp := &opi.LRP{LRPIdentifier: opi.LRPIdentifier{GUID: guid, Version: version}, AppName: appName, SpaceName: spaceName}
		name := names.DeploymentName(lrp)
		if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
			t.Fatalf("name %q for app %q space %q: %v", name, appName, spaceName, errs)
		}
		if len(name) > 45 {
			t.Fatalf("name %q is %d characters, more than 45", name, len(name))
		}
		for _, secret := range []string{name + "-env", name + "-registry"} {
			if errs := validation.IsDNS1123Subdomain(secret); len(errs) > 0 {
				t.Fatalf("secret name %q: %v", secret, errs)
			}
		}
		if again := names.DeploymentName(lrp); again != name {
			t.Fatalf("name not deterministic: %q then %q", name, again)
		}
	})
}
