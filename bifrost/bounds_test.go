package bifrost_test

import (
	"encoding/json"
	"errors"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("Count bounds", func() {
	routes := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{"hostname": fmt.Sprintf("r%d.example.com", i), "port": 8080}
		}
		return out
	}
	env := func(n int) map[string]any {
		out := map[string]any{}
		for i := range n {
			out[fmt.Sprintf("VAR_%d", i)] = "x"
		}
		return out
	}
	rules := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{"protocol": "tcp", "destinations": []string{"10.0.0.0/8"}}
		}
		return out
	}
	ports := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = 8080 + i
		}
		return out
	}
	mounts := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{"volume_id": fmt.Sprintf("claim-%d", i), "mount_dir": fmt.Sprintf("/data/%d", i)}
		}
		return out
	}
	refused := func(err error, message string) {
		ExpectWithOffset(1, err).To(MatchError(opi.ErrInvalid))
		var verr *bifrost.ValidationError
		ExpectWithOffset(1, errors.As(err, &verr)).To(BeTrue())
		ExpectWithOffset(1, err.Error()).To(Equal(message))
	}

	DescribeTable("refuse a desire beyond a bound with a 400 naming the field and the bound",
		func(key string, at, beyond any, message string) {
			_, err := convertDesire(with(func(m map[string]any) {
				m[key] = at
				if key == "ports" {
					// Each port needs no route; keep the health check on the first.
					m["routes"] = map[string]any{}
				}
			}))
			if key != "volume_mounts" {
				Expect(err).NotTo(HaveOccurred(), "at the bound")
			}
			_, err = convertDesire(with(func(m map[string]any) { m[key] = beyond }))
			refused(err, message)
		},
		Entry("routes", "routes", map[string]any{"cf-router": routes(bifrost.MaxRoutes)}, map[string]any{"cf-router": routes(bifrost.MaxRoutes + 1)},
			"routes has 1001 entries, at most 1000 are allowed"),
		Entry("ports", "ports", ports(bifrost.MaxPorts), ports(bifrost.MaxPorts+1), "ports has 11 entries, at most 10 are allowed"),
		Entry("environment", "environment", env(bifrost.MaxEnvEntries), env(bifrost.MaxEnvEntries+1),
			"environment has 1001 entries, at most 1000 are allowed"),
		Entry("egress rules", "egress_rules", rules(bifrost.MaxEgressRules), rules(bifrost.MaxEgressRules+1),
			"egress_rules has 1001 entries, at most 1000 are allowed"),
		Entry("volume mounts", "volume_mounts", mounts(bifrost.MaxVolumeMounts), mounts(bifrost.MaxVolumeMounts+1),
			"volume_mounts has 33 entries, at most 32 are allowed"),
	)

	It("counts every hostname of a route entry", func() {
		hostnames := make([]string, bifrost.MaxRoutes+1)
		for i := range hostnames {
			hostnames[i] = fmt.Sprintf("h%d.example.com", i)
		}
		_, err := convertDesire(with(func(m map[string]any) {
			m["routes"] = map[string]any{"cf-router": []any{map[string]any{"hostnames": hostnames, "port": 8080}}}
		}))
		refused(err, "routes has 1001 entries, at most 1000 are allowed")
	})

	It("refuses an update's routes beyond the bound", func() {
		list, err := json.Marshal(routes(bifrost.MaxRoutes + 1))
		Expect(err).NotTo(HaveOccurred())
		body := fmt.Sprintf(`{"guid":"%s","version":"%s","update":{"routes":{"cf-router":%s}}}`, guid, version, list)
		_, _, err = bifrost.ConvertUpdate(decodeUpdate(body))
		refused(err, "update.routes has 1001 entries, at most 1000 are allowed")
	})

	It("refuses a task's and a staging's environment beyond the bound", func() {
		list := make([]models.EnvironmentVariable, bifrost.MaxEnvEntries+1)
		for i := range list {
			list[i] = models.EnvironmentVariable{Name: fmt.Sprintf("VAR_%d", i), Value: "x"}
		}
		task := &bifrost.Task{Backend: new(fakes.FakeTaskBackend), URLs: new(fakes.FakeURLChecker)}
		_, err := task.ConvertTask("5b1e5f3a-1c2d-4e3f-8a9b-0c1d2e3f4a5b", models.TaskRequest{
			Environment: list, CompletionCallback: "https://cc.internal/x",
			Lifecycle: models.Lifecycle{DockerLifecycle: &models.DockerLifecycle{Image: "busybox"}},
		})
		refused(err, "environment has 1001 entries, at most 1000 are allowed")

		req := stagingRequest()
		req.Environment = list
		_, err = bifrost.ConvertStaging(stagingGUID, req, new(fakes.FakeURLChecker))
		refused(err, "environment has 1001 entries, at most 1000 are allowed")
	})
})
