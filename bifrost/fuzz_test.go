package bifrost_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

// FuzzConvertDesire: whatever JSON arrives, conversion either rejects it as invalid or yields an
// LRP within the contract's bounds. It never panics.
func FuzzConvertDesire(f *testing.F) {
	f.Add([]byte(desireBody()))
	f.Add([]byte(`{"guid":"a","version":"b","memory_mb":1,"lifecycle":{"docker_lifecycle":{"image":"x"}}}`))
	f.Add([]byte(`{"guid":"a","version":"b","memory_mb":1,"lifecycle":{"buildpack_lifecycle":{}}}`))
	f.Add([]byte(`{"guid":"a","version":"b","memory_mb":1,"routes":{"cf-router":[{"hostnames":["h"],"port":1}]},"lifecycle":{"docker_lifecycle":{"image":"x"}}}`))
	f.Add([]byte(`{"environment":{"a=b":"c"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req models.DesireLRPRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		lrp, err := bifrost.ConvertDesire(req, bifrost.Rules{})
		if err != nil {
			if !errors.Is(err, opi.ErrInvalid) {
				t.Fatalf("rejection %q is not ErrInvalid", err)
			}
			return
		}
		if bifrost.ValidateIdentifier(lrp.LRPIdentifier) != nil || lrp.Image == "" {
			t.Fatalf("accepted an LRP without a valid identity or image: %+v", lrp.LRPIdentifier)
		}
		if lrp.Instances < 0 || lrp.Instances > bifrost.MaxInstances || lrp.MemoryMB < 1 || lrp.MemoryMB > bifrost.MaxMemoryMB ||
			lrp.DiskMB < 0 || lrp.DiskMB > bifrost.MaxDiskMB || lrp.CPUWeight < 0 || lrp.CPUWeight > bifrost.MaxCPUWeight {
			t.Fatalf("accepted out-of-bounds resources: %d instances, %d MB, %d MB disk, %d cpu", lrp.Instances, lrp.MemoryMB, lrp.DiskMB, lrp.CPUWeight)
		}
		for _, p := range lrp.Ports {
			if p < 1 || p > bifrost.MaxPort {
				t.Fatalf("accepted port %d", p)
			}
		}
		for _, r := range lrp.Routes {
			if r.Hostname == "" || r.Port < 1 || r.Port > bifrost.MaxPort {
				t.Fatalf("accepted route %+v", r)
			}
		}
		if len(lrp.Env) != len(req.Environment) {
			t.Fatalf("lost environment variables")
		}
	})
}

// FuzzConvertUpdate: updates are rejected as invalid or stay within bounds.
func FuzzConvertUpdate(f *testing.F) {
	f.Add([]byte(`{"guid":"a","version":"b","update":{"instances":3,"annotation":"2.0","routes":{"cf-router":[{"hostname":"h","port":8080}]}}}`))
	f.Add([]byte(`{"guid":"a","version":"b","update":{"image":""}}`))
	f.Add([]byte(`{"guid":"a","version":"b"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var req models.UpdateDesiredLRPRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		_, u, err := bifrost.ConvertUpdate(req)
		if err != nil {
			if !errors.Is(err, opi.ErrInvalid) {
				t.Fatalf("rejection %q is not ErrInvalid", err)
			}
			return
		}
		if u.Instances != nil && (*u.Instances < 0 || *u.Instances > bifrost.MaxInstances) {
			t.Fatalf("accepted %d instances", *u.Instances)
		}
		if u.Annotation != nil && req.Update.Annotation != nil && *u.Annotation != *req.Update.Annotation {
			t.Fatalf("annotation changed")
		}
	})
}

// anyAnnotation is an allow-list every key starts with: the fuzzer explores Kubernetes' rules
// for annotation keys, not the operator's prefixes (a configuration refuses an empty prefix).
var anyAnnotation = []string{""}

// FuzzKubeRules: a desire with a random annotation key, guid and env name is either refused as
// a ValidationError (opi.ErrInvalid, a 400) before the backend is called, or handed to the
// backend with values Kubernetes accepts.
func FuzzKubeRules(f *testing.F) {
	f.Add("example.com/team", "2f3e8a2c-2c3e-4b1d-9c7e-0a1b2c3d4e5f", "spring.profiles.active", false)
	f.Add("bad key!", "abc", "A", false)
	f.Add("ok", "abc-", "A", false)
	f.Add("ok", "abc", "a:b", true)
	f.Add("Example.COM/Owner", "abc", "A=B", false)
	f.Add("", "", "", false)
	f.Fuzz(func(t *testing.T, annotationKey, guid, envName string, strict bool) {
		backend := new(fakes.FakeLRPBackend)
		lrps := &bifrost.LRP{Backend: backend, Rules: bifrost.Rules{StrictEnvNames: strict, UserAnnotationPrefixes: anyAnnotation}}
		req := models.DesireLRPRequest{
			GUID: guid, Version: "v1", MemoryMB: 64, Instances: 1,
			Environment:            map[string]string{envName: "value"},
			Lifecycle:              models.Lifecycle{DockerLifecycle: &models.DockerLifecycle{Image: "busybox"}},
			UserDefinedAnnotations: map[string]string{annotationKey: "v"},
		}
		err := lrps.Desire(context.Background(), req)
		if err != nil {
			var verr *bifrost.ValidationError
			if !errors.As(err, &verr) || !errors.Is(err, opi.ErrInvalid) {
				t.Fatalf("refusal %q is not a ValidationError", err)
			}
			if backend.DesireLRPCallCount() != 0 {
				t.Fatalf("refused (%v) after calling the backend", err)
			}
			return
		}
		if backend.DesireLRPCallCount() != 1 {
			t.Fatalf("accepted but the backend was called %d times", backend.DesireLRPCallCount())
		}
		check := validation.IsRelaxedEnvVarName
		if strict {
			check = validation.IsEnvVarName
		}
		if msgs := check(envName); len(msgs) > 0 {
			t.Fatalf("accepted env name %q: %v", envName, msgs)
		}
		if msgs := validation.IsValidLabelValue(guid); len(msgs) > 0 {
			t.Fatalf("accepted guid %q: %v", guid, msgs)
		}
		if errs := apimachineryvalidation.ValidateAnnotations(map[string]string{annotationKey: "v"}, field.NewPath("a")); len(errs) > 0 {
			t.Fatalf("accepted annotation key %q: %v", annotationKey, errs)
		}
	})
}

// loopbackOnly stands in for cc.Client.CheckURL with a broad allow-list, roughly: https
// anywhere, http to 127.0.0.1 (the fuzzer is after the conversion's bounds, not the list).
type loopbackOnly struct{}

func (loopbackOnly) CheckURL(raw string) error {
	if strings.HasPrefix(raw, "https://") || strings.HasPrefix(raw, "http://127.0.0.1") {
		return nil
	}
	return errors.New("not https")
}

// FuzzConvertTask: whatever TaskRequest arrives, conversion either rejects it as invalid or
// yields a task within the contract's bounds, with a callback and an image. It never panics.
func FuzzConvertTask(f *testing.F) {
	f.Add("a-guid", []byte(`{"completion_callback":"https://cc/x","environment":[{"name":"MEMORY_LIMIT","value":"256m"}],"lifecycle":{"docker_lifecycle":{"image":"x","command":["/bin/sh","-c","exit 0"]}}}`))
	f.Add("a-guid", []byte(`{"completion_callback":"http://10.0.0.1/x","lifecycle":{"docker_lifecycle":{"image":"x"}}}`))
	f.Add("a-guid", []byte(`{"completion_callback":"https://cc/x","environment":[{"name":"MEMORY_LIMIT","value":"99999999g"}],"lifecycle":{"docker_lifecycle":{"image":"x"}}}`))
	f.Add("A", []byte(`{"lifecycle":{"buildpack_lifecycle":{}}}`))
	task := &bifrost.Task{URLs: loopbackOnly{}, Defaults: bifrost.DefaultTaskDefaults}
	f.Fuzz(func(t *testing.T, guid string, body []byte) {
		var req models.TaskRequest
		if json.Unmarshal(body, &req) != nil {
			return
		}
		got, err := task.ConvertTask(guid, req)
		if err != nil {
			if !errors.Is(err, opi.ErrInvalid) {
				t.Fatalf("rejection %q is not ErrInvalid", err)
			}
			return
		}
		if got.GUID != guid || got.Image == "" || got.CompletionCallback == "" {
			t.Fatalf("accepted a task without guid, image or callback")
		}
		if got.MemoryMB < 1 || got.MemoryMB > bifrost.MaxMemoryMB || got.DiskMB < 0 || got.DiskMB > bifrost.MaxDiskMB ||
			got.CPUWeight < 0 || got.CPUWeight > bifrost.MaxCPUWeight {
			t.Fatalf("accepted out-of-bounds resources: %d MB, %d MB disk, %d cpu", got.MemoryMB, got.DiskMB, got.CPUWeight)
		}
	})
}
