package bifrost_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/opi-bridge/opi/bifrost"
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
