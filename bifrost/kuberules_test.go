package bifrost_test

import (
	"errors"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/opi"
)

// Every input that Kubernetes would refuse once it reached the API server (or the kubelet), and
// that opi therefore refuses before its first write, naming the field and the rule.
var _ = Describe("Kubernetes' rules", func() {
	route := func(hostname string) map[string]any {
		return map[string]any{"cf-router": []any{map[string]any{"hostname": hostname, "port": 8080}}}
	}
	image := func(ref string) map[string]any {
		return map[string]any{"docker_lifecycle": map[string]any{"image": ref, "command": []string{}}}
	}

	DescribeTable("a desire is refused before anything is written",
		func(rules bifrost.Rules, mutate func(m map[string]any), message string) {
			_, err := bifrost.ConvertDesire(with(mutate), rules)
			Expect(err).To(HaveOccurred())
			Expect(errors.Is(err, opi.ErrInvalid)).To(BeTrue(), "error %q should be ErrInvalid", err)
			var verr *bifrost.ValidationError
			Expect(errors.As(err, &verr)).To(BeTrue())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("annotation key with a space and '!'", bifrost.Rules{}, func(m map[string]any) {
			m["user_defined_annotations"] = map[string]string{"bad key!": "v"}
		}, `user_defined_annotations has a key "bad key!" that is not a Kubernetes annotation key: name part must consist of`),
		Entry("annotation key with an empty name part", bifrost.Rules{}, func(m map[string]any) {
			m["user_defined_annotations"] = map[string]string{"example.com/": "v"}
		}, `user_defined_annotations has a key "example.com/"`),
		Entry("annotation key with a prefix that is no DNS name", bifrost.Rules{}, func(m map[string]any) {
			m["user_defined_annotations"] = map[string]string{"Not_DNS!/key": "v"}
		}, `user_defined_annotations has a key "Not_DNS!/key"`),
		Entry("annotation name part over 63 chars", bifrost.Rules{}, func(m map[string]any) {
			m["user_defined_annotations"] = map[string]string{strings.Repeat("a", 64): "v"}
		}, "name part must be no more than 63 bytes"),
		Entry("annotations over 256 KiB", bifrost.Rules{}, func(m map[string]any) {
			m["user_defined_annotations"] = map[string]string{"a": strings.Repeat("x", 256<<10)}
		}, "user_defined_annotations are larger than the 262144 bytes"),
		Entry("opi's own annotation as a user annotation (it would silence crash reports)", bifrost.Rules{}, func(m map[string]any) {
			m["user_defined_annotations"] = map[string]string{"prometheus.io/scrape": "true", "opi-bridge.io/crashes-reported": "2147483647"}
		}, `user_defined_annotations has a key "opi-bridge.io/crashes-reported" that opi does not pass to pods: allowed are keys starting with "prometheus.io/"`),
		Entry("an AppArmor annotation", bifrost.Rules{}, func(m map[string]any) {
			m["user_defined_annotations"] = map[string]string{"container.apparmor.security.beta.kubernetes.io/opi": "unconfined"}
		}, `user_defined_annotations has a key "container.apparmor.security.beta.kubernetes.io/opi" that opi does not pass to pods`),
		Entry("a CNI annotation outside the operator's prefixes", bifrost.Rules{UserAnnotationPrefixes: []string{"prometheus.io/", "example.com/"}}, func(m map[string]any) {
			m["user_defined_annotations"] = map[string]string{"k8s.v1.cni.cncf.io/networks": "host"}
		}, `has a key "k8s.v1.cni.cncf.io/networks" that opi does not pass to pods: allowed are keys starting with "prometheus.io/", "example.com/"`),
		Entry("any user annotation when the operator allows none", bifrost.Rules{UserAnnotationPrefixes: []string{}}, func(m map[string]any) {
			m["user_defined_annotations"] = map[string]string{"prometheus.io/scrape": "true"}
		}, `has a key "prometheus.io/scrape" that opi does not pass to pods: none is allowed`),
		Entry("guid ending in '-'", bifrost.Rules{}, func(m map[string]any) {
			m["guid"] = "abc-"
			m["process_guid"] = "abc-" + "-" + version
		}, `guid "abc-" cannot be a Kubernetes label value`),
		Entry("version starting with '-'", bifrost.Rules{}, func(m map[string]any) {
			m["version"] = "-abc"
			m["process_guid"] = guid + "--abc"
		}, `version "-abc" cannot be a Kubernetes label value`),
		Entry("environment over a Secret's 1 MiB", bifrost.Rules{}, func(m map[string]any) {
			m["environment"] = map[string]string{"BIG": strings.Repeat("x", 1<<20)}
		}, "environment is 1048579 bytes (names and values), more than the 1048576 a Kubernetes Secret holds"),
		Entry("env name with ':' on a strict cluster", bifrost.Rules{StrictEnvNames: true}, func(m map[string]any) {
			m["environment"] = map[string]string{"a:b": "x"}
		}, `environment has a variable name "a:b" that Kubernetes refuses under its strict (this cluster's) rule`),
		Entry("env name starting with a digit on a strict cluster", bifrost.Rules{StrictEnvNames: true}, func(m map[string]any) {
			m["environment"] = map[string]string{"1A": "x"}
		}, `"1A"`),
		Entry("env name with '='", bifrost.Rules{}, func(m map[string]any) {
			m["environment"] = map[string]string{"A=B": "x"}
		}, `environment has a variable name "A=B" that Kubernetes refuses under its relaxed rule`),
		Entry("env name beyond ASCII", bifrost.Rules{}, func(m map[string]any) {
			m["environment"] = map[string]string{"GRÜN": "x"}
		}, `"GRÜN"`),
		Entry("route hostname with a space", bifrost.Rules{}, func(m map[string]any) { m["routes"] = route("not a host") },
			`routes.cf-router[0].hostname "not a host" is not a DNS name`),
		Entry("route hostname in upper case", bifrost.Rules{}, func(m map[string]any) { m["routes"] = route("Dora.example.com") }, "routes.cf-router[0].hostname"),
		Entry("route hostname with an empty label", bifrost.Rules{}, func(m map[string]any) { m["routes"] = route("a..example.com") }, "routes.cf-router[0].hostname"),
		Entry("route hostname over 253 chars", bifrost.Rules{}, func(m map[string]any) {
			m["routes"] = route(strings.Repeat("a.", 127) + "com")
		}, "must be no more than 253 characters"),
		Entry("route hostname in Diego's list form", bifrost.Rules{}, func(m map[string]any) {
			m["routes"] = map[string]any{"cf-router": []any{map[string]any{"hostnames": []string{"ok.example.com", "bad_host"}, "port": 8080}}}
		}, `routes.cf-router[0].hostnames[1] "bad_host"`),
		Entry("route path with a space", bifrost.Rules{}, func(m map[string]any) { m["routes"] = route("example.com/a b") }, "has a path that is not a URL path"),
		Entry("image in upper case", bifrost.Rules{}, func(m map[string]any) { m["lifecycle"] = image("Cloudfoundry/Dora") },
			`lifecycle.docker_lifecycle.image "Cloudfoundry/Dora" is not an image reference Kubernetes can pull`),
		Entry("image with an empty tag", bifrost.Rules{}, func(m map[string]any) { m["lifecycle"] = image("busybox:") }, "lifecycle.docker_lifecycle.image"),
		Entry("image with surrounding space", bifrost.Rules{}, func(m map[string]any) { m["lifecycle"] = image(" busybox") }, "lifecycle.docker_lifecycle.image"),
		Entry("image with a short digest", bifrost.Rules{}, func(m map[string]any) { m["lifecycle"] = image("busybox@sha256:abc") }, "lifecycle.docker_lifecycle.image"),
		Entry("image that is a URL", bifrost.Rules{}, func(m map[string]any) { m["lifecycle"] = image("https://example.com/img") }, "lifecycle.docker_lifecycle.image"),
		Entry("a port twice (one Service port each)", bifrost.Rules{}, func(m map[string]any) { m["ports"] = []int{8080, 8080} }, "ports lists port 8080 twice"),
	)

	DescribeTable("what Kubernetes accepts passes unchanged",
		func(rules bifrost.Rules, mutate func(m map[string]any)) {
			_, err := bifrost.ConvertDesire(with(mutate), rules)
			Expect(err).NotTo(HaveOccurred())
		},
		Entry("env names with ':' and '.' and spaces on a current cluster", bifrost.Rules{}, func(m map[string]any) {
			m["environment"] = map[string]string{"a:b": "1", "spring.profiles.active": "2", "WITH SPACE": "3", "1A": "4"}
		}),
		Entry("C-like env names on a strict cluster", bifrost.Rules{StrictEnvNames: true}, func(m map[string]any) {
			m["environment"] = map[string]string{"spring.profiles.active": "1", "MY-VAR_2": "2"}
		}),
		Entry("an environment of exactly 1 MiB", bifrost.Rules{}, func(m map[string]any) {
			m["environment"] = map[string]string{"BIG": strings.Repeat("x", 1<<20-3)}
		}),
		Entry("annotation keys with a prefix, in any case, that the operator allows", bifrost.Rules{UserAnnotationPrefixes: []string{"Example.COM/", "plain_"}}, func(m map[string]any) {
			m["user_defined_annotations"] = map[string]string{"Example.COM/Owner": "team a!", "plain_key.1": ""}
		}),
		Entry("CC's Prometheus annotations by default", bifrost.Rules{}, func(m map[string]any) {
			m["user_defined_annotations"] = map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"}
		}),
		Entry("a plain annotation key, when the operator allows any (a desire's own check, not exported)", bifrost.Rules{UserAnnotationPrefixes: []string{""}}, func(m map[string]any) {
			m["user_defined_annotations"] = map[string]string{"ok": "v"}
		}),
		Entry("distinct ports (a desire's own check, not exported)", bifrost.Rules{}, func(m map[string]any) {
			m["ports"] = []int{8080, 9090}
		}),
		Entry("a wildcard route", bifrost.Rules{}, func(m map[string]any) { m["routes"] = route("*.apps.example.com") }),
		Entry("a route with a path", bifrost.Rules{}, func(m map[string]any) { m["routes"] = route("dora.example.com/api/v1") }),
		Entry("images by digest, with a registry port, on Docker Hub", bifrost.Rules{}, func(m map[string]any) {
			m["lifecycle"] = image("localhost:5000/team/app@sha256:" + strings.Repeat("a", 64))
		}),
		Entry("any app_guid and process_type (the backend makes label values of them)", bifrost.Rules{}, func(m map[string]any) {
			m["app_guid"] = "not a guid!"
			m["process_type"] = "web/worker"
		}),
	)

	DescribeTable("an update is refused the same way",
		func(body, message string) {
			_, _, err := bifrost.ConvertUpdate(decodeUpdate(`{"guid":"` + guid + `","version":"` + version + `","update":` + body + `}`))
			Expect(err).To(HaveOccurred())
			Expect(errors.Is(err, opi.ErrInvalid)).To(BeTrue())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("a route hostname that is no DNS name", `{"routes":{"cf-router":[{"hostname":"bad host!","port":8080}]}}`, `update.routes.cf-router[0].hostname "bad host!" is not a DNS name`),
		Entry("an image that does not parse", `{"image":"Bad/Image"}`, `update.image "Bad/Image" is not an image reference`),
		Entry("an empty image", `{"image":""}`, "update.image is required"),
	)

	It("exports each check for the task and staging converters", func() {
		Expect(bifrost.ValidateEnvName("environment[0].name", "a:b", bifrost.Rules{})).To(Succeed())
		Expect(bifrost.ValidateEnvName("environment[0].name", "a:b", bifrost.Rules{StrictEnvNames: true})).To(MatchError(ContainSubstring("environment[0].name")))
		Expect(bifrost.ValidateEnv("environment", map[string]string{"A": "b"}, bifrost.Rules{})).To(Succeed())
		Expect(bifrost.ValidateLabelValue("guid", "abc-")).To(MatchError(ContainSubstring("guid")))
		Expect(bifrost.ValidateRouteHostname("route", "a.example.com")).To(Succeed())
		Expect(bifrost.ValidateImage("image", "cloudfoundry/dora:latest")).To(Succeed())
	})
})
