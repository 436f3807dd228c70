package bifrost_test

import (
	"encoding/json"
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

const (
	guid    = "2f3e8a2c-2c3e-4b1d-9c7e-0a1b2c3d4e5f"
	version = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
)

// desireBody is a request as CC sends it; tests change one thing at a time.
func desireBody() string {
	return `{
	  "guid": "` + guid + `", "version": "` + version + `",
	  "process_guid": "` + guid + `-` + version + `",
	  "process_type": "web", "app_guid": "app-guid-1", "app_name": "dora",
	  "space_guid": "space-guid-1", "space_name": "dev", "organization_guid": "org-guid-1", "organization_name": "acme",
	  "environment": {"VCAP_SERVICES": "{\"db\":[{\"credentials\":{\"password\":\"s3cret\"}}]}", "PORT": "8080", "spring.profiles.active": "cloud", "a:b": "c"},
	  "egress_rules": [{"protocol": "tcp", "destinations": ["10.0.0.0/8"]}, {"protocol": "udp", "destinations": ["1.1.1.1"], "portRange": {"start": 53, "end": 54}}],
	  "placement_tags": ["iso-1"],
	  "instances": 3, "memory_mb": 256, "disk_mb": 1024, "cpu_weight": 100,
	  "health_check_type": "http", "health_check_http_endpoint": "/health",
	  "health_check_timeout_ms": 3000, "start_timeout_ms": 90000,
	  "last_updated": "1600000000.2499998",
	  "volume_mounts": [],
	  "ports": [8080, 9090],
	  "routes": {"cf-router": [{"hostname": "dora.example.com", "port": 8080}, {"hostnames": ["a.example.com", "b.example.com"], "port": 9090}],
	             "tcp-router": [{"external_port": 1, "whatever": true}]},
	  "lifecycle": {"docker_lifecycle": {"image": "registry.example.com:5000/team/dora:v1", "command": ["/bin/sh", "-c", "./run"],
	                "registry_username": "bob", "registry_password": "hunter2"}},
	  "user_defined_annotations": {"prometheus.io/scrape": "true"},
	  "namespace": "old-cc-sends-this",
	  "some_future_key": {"nested": 1}
	}`
}

func decode(body string) models.DesireLRPRequest {
	var req models.DesireLRPRequest
	ExpectWithOffset(1, json.Unmarshal([]byte(body), &req)).To(Succeed())
	return req
}

// with returns the request after mutate has changed a decoded copy of it.
func with(mutate func(m map[string]any)) models.DesireLRPRequest {
	var m map[string]any
	Expect(json.Unmarshal([]byte(desireBody()), &m)).To(Succeed())
	mutate(m)
	b, err := json.Marshal(m)
	Expect(err).NotTo(HaveOccurred())
	return decode(string(b))
}

var _ = Describe("ConvertDesire", func() {
	It("carries every field CC sends into the LRP", func() {
		lrp, err := convertDesire(decode(desireBody()))
		Expect(err).NotTo(HaveOccurred())

		Expect(lrp.GUID).To(Equal(guid))
		Expect(lrp.Version).To(Equal(version))
		Expect(lrp.ProcessGUID()).To(Equal(guid + "-" + version))
		Expect(lrp.ProcessType).To(Equal("web"))
		Expect(lrp.AppGUID).To(Equal("app-guid-1"))
		Expect(lrp.AppName).To(Equal("dora"))
		Expect(lrp.SpaceGUID).To(Equal("space-guid-1"))
		Expect(lrp.SpaceName).To(Equal("dev"))
		Expect(lrp.OrganizationGUID).To(Equal("org-guid-1"))
		Expect(lrp.OrganizationName).To(Equal("acme"))
		Expect(lrp.Image).To(Equal("registry.example.com:5000/team/dora:v1"))
		Expect(lrp.Command).To(Equal([]string{"/bin/sh", "-c", "./run"}))
		Expect(lrp.Env).To(Equal(map[string]string{
			"VCAP_SERVICES":          `{"db":[{"credentials":{"password":"s3cret"}}]}`,
			"PORT":                   "8080",
			"spring.profiles.active": "cloud",
			"a:b":                    "c",
		}))
		Expect(lrp.Ports).To(Equal([]int32{8080, 9090}))
		Expect(lrp.Health).To(Equal(opi.HealthCheck{Type: "http", Endpoint: "/health", TimeoutMs: 3000, StartTimeoutMs: 90000}))
		Expect(lrp.MemoryMB).To(BeEquivalentTo(256))
		Expect(lrp.DiskMB).To(BeEquivalentTo(1024))
		Expect(lrp.CPUWeight).To(BeEquivalentTo(100))
		Expect(lrp.Instances).To(BeEquivalentTo(3))
		Expect(lrp.Routes).To(Equal([]opi.Route{
			{Hostname: "dora.example.com", Port: 8080},
			{Hostname: "a.example.com", Port: 9090},
			{Hostname: "b.example.com", Port: 9090},
		}))
		Expect(lrp.LastUpdated).To(Equal("1600000000.2499998"))
		Expect(lrp.UserDefinedAnnotations).To(Equal(map[string]string{"prometheus.io/scrape": "true"}))
		Expect(lrp.PrivateRegistry).To(Equal(&opi.PrivateRegistry{Server: "registry.example.com:5000", Username: "bob", Password: "hunter2"}))
	})

	It("keeps last_updated byte for byte", func() {
		for _, annotation := range []string{"2.0", "1600000000.2499998", "1.0e+10", " 7 "} {
			lrp, err := convertDesire(with(func(m map[string]any) { m["last_updated"] = annotation }))
			Expect(err).NotTo(HaveOccurred())
			Expect(lrp.LastUpdated).To(Equal(annotation))
		}
	})

	It("accepts a request without routes, ports, registry or process_guid", func() {
		lrp, err := convertDesire(with(func(m map[string]any) {
			delete(m, "routes")
			delete(m, "process_guid")
			m["ports"] = []int{}
			m["health_check_type"] = "process"
			m["lifecycle"] = map[string]any{"docker_lifecycle": map[string]any{"image": "busybox", "command": []string{}}}
		}))
		Expect(err).NotTo(HaveOccurred())
		Expect(lrp.Routes).To(BeEmpty())
		Expect(lrp.Ports).To(BeEmpty())
		Expect(lrp.PrivateRegistry).To(BeNil())
		Expect(lrp.Health.Type).To(Equal("process"))
	})

	DescribeTable("finds the registry of an image",
		func(image, server string) {
			Expect(bifrost.RegistryServer(image)).To(Equal(server))
		},
		Entry("docker hub short name", "busybox", "https://index.docker.io/v1/"),
		Entry("docker hub user image", "cloudfoundry/dora:latest", "https://index.docker.io/v1/"),
		Entry("registry with port", "registry.example.com:5000/x/y", "registry.example.com:5000"),
		Entry("registry host", "gcr.io/project/image@sha256:abc", "gcr.io"),
		Entry("localhost", "localhost/image", "localhost"),
		Entry("docker.io named", "docker.io/library/busybox", "https://index.docker.io/v1/"),
		Entry("an upper-case first component is a host to the kubelet", "Registry/image", "Registry"),
	)

	DescribeTable("defaults the health check",
		func(hcType string, ports []int, wantType, wantEndpoint string) {
			lrp, err := convertDesire(with(func(m map[string]any) {
				m["health_check_type"] = hcType
				m["health_check_http_endpoint"] = nil
				m["ports"] = ports
				m["routes"] = map[string]any{}
			}))
			Expect(err).NotTo(HaveOccurred())
			Expect(lrp.Health.Type).To(Equal(wantType))
			Expect(lrp.Health.Endpoint).To(Equal(wantEndpoint))
		},
		Entry("empty with a port → port", "", []int{8080}, "port", ""),
		Entry("empty without a port → process", "", []int{}, "process", ""),
		Entry("http without endpoint → /", "http", []int{8080}, "http", "/"),
		Entry("none stays none", "none", []int{}, "none", ""),
	)

	DescribeTable("rejects what cannot run, naming the field",
		func(mutate func(m map[string]any), field string) {
			_, err := convertDesire(with(mutate))
			Expect(err).To(HaveOccurred())
			Expect(errors.Is(err, opi.ErrInvalid)).To(BeTrue(), "error %q should be ErrInvalid", err)
			Expect(err.Error()).To(ContainSubstring(field))
		},
		Entry("no guid", func(m map[string]any) { delete(m, "guid") }, "guid is required"),
		Entry("no version", func(m map[string]any) { m["version"] = "" }, "version is required"),
		Entry("guid too long", func(m map[string]any) { m["guid"] = string(make([]byte, 64)) }, "guid"),
		Entry("guid upper case", func(m map[string]any) { m["guid"] = "ABC" }, "guid"),
		Entry("version with a slash", func(m map[string]any) { m["version"] = "a/b" }, "version"),
		Entry("process_guid not guid-version", func(m map[string]any) { m["process_guid"] = "other" }, "process_guid"),
		Entry("no lifecycle", func(m map[string]any) { delete(m, "lifecycle") }, "lifecycle.docker_lifecycle is required"),
		Entry("buildpack lifecycle", func(m map[string]any) {
			m["lifecycle"] = map[string]any{"buildpack_lifecycle": map[string]any{"droplet_hash": "abc", "droplet_guid": "d", "start_command": "./x"}}
		}, "buildpack_lifecycle is not supported"),
		Entry("no image", func(m map[string]any) {
			m["lifecycle"] = map[string]any{"docker_lifecycle": map[string]any{"image": " "}}
		}, "lifecycle.docker_lifecycle.image \" \" is not an image reference"),
		Entry("negative instances", func(m map[string]any) { m["instances"] = -1 }, "instances must be between 0 and 32767"),
		Entry("too many instances", func(m map[string]any) { m["instances"] = 32768 }, "instances"),
		Entry("zero memory", func(m map[string]any) { m["memory_mb"] = 0 }, "memory_mb must be between 1 and 1048576"),
		Entry("huge memory", func(m map[string]any) { m["memory_mb"] = 1048577 }, "memory_mb"),
		Entry("negative disk", func(m map[string]any) { m["disk_mb"] = -1 }, "disk_mb"),
		Entry("huge disk", func(m map[string]any) { m["disk_mb"] = 1048577 }, "disk_mb"),
		Entry("cpu_weight over 100", func(m map[string]any) { m["cpu_weight"] = 256 }, "cpu_weight must be between 0 and 100"),
		Entry("port 0", func(m map[string]any) { m["ports"] = []int{0} }, "ports"),
		Entry("port 65536", func(m map[string]any) { m["ports"] = []int{8080, 65536} }, "ports"),
		Entry("unknown health check", func(m map[string]any) { m["health_check_type"] = "tcp" }, "health_check_type \"tcp\" is not one of"),
		Entry("port check without ports", func(m map[string]any) {
			m["health_check_type"] = "port"
			m["ports"] = []int{}
		}, "health_check_type"),
		Entry("env name with =", func(m map[string]any) { m["environment"] = map[string]string{"A=B": "x"} }, "environment"),
		Entry("empty env name", func(m map[string]any) { m["environment"] = map[string]string{"": "x"} }, "environment"),
		Entry("env name with newline", func(m map[string]any) { m["environment"] = map[string]string{"A\nB": "x"} }, "environment"),
		Entry("cf-router not a list", func(m map[string]any) { m["routes"] = map[string]any{"cf-router": "dora.example.com"} }, "routes.cf-router"),
		Entry("cf-router entry not an object", func(m map[string]any) { m["routes"] = map[string]any{"cf-router": []any{"x"}} }, "routes.cf-router[0]"),
		Entry("cf-router entry without hostname", func(m map[string]any) {
			m["routes"] = map[string]any{"cf-router": []any{map[string]any{"port": 8080}}}
		}, "routes.cf-router[0] has no hostname"),
		Entry("cf-router port out of range", func(m map[string]any) {
			m["routes"] = map[string]any{"cf-router": []any{map[string]any{"hostname": "a", "port": 70000}}}
		}, "routes.cf-router[0].port"),
	)

	It("never puts a secret value in an error message", func() {
		_, err := convertDesire(with(func(m map[string]any) {
			m["environment"] = map[string]string{"A=B": "s3cret-value"}
		}))
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).NotTo(ContainSubstring("s3cret-value"))
	})
})

// convertDesire converts under a current cluster's rules (relaxed env names).
func convertDesire(req models.DesireLRPRequest) (*opi.LRP, error) {
	return bifrost.ConvertDesire(req, bifrost.Rules{})
}
