package lrp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"code.cloudfoundry.org/lager/v3"
	appsv1 "k8s.io/api/apps/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
	"github.com/opi-bridge/opi/testsupport/fakekube"
)

// anyAnnotation is an allow-list every key starts with: the fuzzer explores Kubernetes' rules
// for annotation keys, not the operator's prefixes (a configuration refuses an empty prefix).
var anyAnnotation = []string{""}

// FuzzDesireRefusedOrListed feeds random annotation keys, guids and env names through the
// bifrost into the Kubernetes backend on a fake clientset: a desire is either refused as invalid
// with nothing written (no create, patch or delete reached the API), or accepted, listed, and
// made of objects that pass the API server's published rules (so a real API server would have
// taken them, too).
func FuzzDesireRefusedOrListed(f *testing.F) {
	f.Add("example.com/team", "2f3e8a2c-2c3e-4b1d-9c7e-0a1b2c3d4e5f", "spring.profiles.active", false)
	f.Add("bad key!", "2f3e8a2c", "A", false)
	f.Add("ok", "guid-ending-in-", "A", false)
	f.Add("ok", "abc", "a:b", true)
	f.Add("ok", "abc", "a:b", false)
	f.Add("Example.COM/Owner", "abc", "A=B", false)
	f.Add("", "abc", "", false)
	f.Add("a/b/c", "-abc", "GRÜN", false)

	client := backendtest.NewClient()
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	// A logger without a sink: the fuzzer runs many thousands of desires.
	backend := backendtest.MustBackend(client, lager.NewLogger("fuzz"), k8s.Options{Namespace: backendtest.Namespace, Store: store.Options{ReadWaitTimeout: time.Second}})
	if err := backend.Start(ctx); err != nil {
		f.Fatal(err)
	}
	const version = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"

	f.Fuzz(func(t *testing.T, annotationKey, guid, envName string, strict bool) {
		lrps := &bifrost.LRP{Backend: backend, Rules: bifrost.Rules{StrictEnvNames: strict, UserAnnotationPrefixes: anyAnnotation}}
		req := models.DesireLRPRequest{
			GUID: guid, Version: version, ProcessType: "web", AppGUID: "app", AppName: "fuzz", SpaceName: "dev",
			Environment: map[string]string{envName: "value"}, Instances: 1, MemoryMB: 64, Ports: []int64{8080},
			HealthCheckType: "port", LastUpdated: "1.0",
			Lifecycle:              models.Lifecycle{DockerLifecycle: &models.DockerLifecycle{Image: "busybox"}},
			UserDefinedAnnotations: map[string]string{annotationKey: "v"},
		}
		client.ClearActions()
		err := lrps.Desire(ctx, req)
		if err != nil {
			if !errors.Is(err, opi.ErrInvalid) {
				t.Fatalf("refusal %q is not ErrInvalid", err)
			}
			for _, a := range client.Actions() {
				switch a.GetVerb() {
				case "create", "update", "patch", "delete":
					t.Fatalf("refused (%v) after a write: %s", err, fakekube.Describe(a))
				}
			}
			return
		}

		id := opi.LRPIdentifier{GUID: guid, Version: version}
		if _, err := backend.GetLRP(ctx, id); err != nil {
			t.Fatalf("accepted but not read back: %v", err)
		}
		list, err := client.AppsV1().Deployments(backendtest.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != 1 {
			t.Fatalf("want one deployment, got %d (%v)", len(list.Items), err)
		}
		if errs := apiServerRules(&list.Items[0], strict); len(errs) > 0 {
			t.Fatalf("accepted what the API server would refuse: %v", errs.ToAggregate())
		}
		if err := backend.StopLRP(ctx, id); err != nil {
			t.Fatalf("stop: %v", err)
		}
		// The fake has no garbage collector: remove what the Deployment owned.
		secrets, _ := client.CoreV1().Secrets(backendtest.Namespace).List(ctx, metav1.ListOptions{})
		for _, s := range secrets.Items {
			_ = client.CoreV1().Secrets(backendtest.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
		}
		services, _ := client.CoreV1().Services(backendtest.Namespace).List(ctx, metav1.ListOptions{})
		for _, s := range services.Items {
			_ = client.CoreV1().Services(backendtest.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{})
		}
	})
}

// apiServerRules is what the API server checks of a Deployment's parts that come from a
// request: metadata, the pod template's labels and annotations, the container's env names.
func apiServerRules(d *appsv1.Deployment, strictEnv bool) field.ErrorList {
	errs := apimachineryvalidation.ValidateObjectMeta(&d.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	template := field.NewPath("spec", "template", "metadata")
	errs = append(errs, metav1validation.ValidateLabels(d.Spec.Template.Labels, template.Child("labels"))...)
	errs = append(errs, apimachineryvalidation.ValidateAnnotations(d.Spec.Template.Annotations, template.Child("annotations"))...)
	check := validation.IsRelaxedEnvVarName
	if strictEnv {
		check = validation.IsEnvVarName
	}
	for i, e := range d.Spec.Template.Spec.Containers[0].Env {
		for _, msg := range check(e.Name) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "template", "spec", "containers").Index(0).Child("env").Index(i).Child("name"), e.Name, msg))
		}
	}
	return errs
}
