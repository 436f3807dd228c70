package integration_test

import (
	"context"
	"encoding/json"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opi-bridge/opi/testsupport/ccstandin"
	"github.com/opi-bridge/opi/testsupport/fixture"
	"github.com/opi-bridge/opi/testsupport/registry"
)

// stagingBody is a docker StagingRequest as CC sends it for `cf push --docker-image`.
func stagingBody(guid, image, username, password, callback string) string {
	body := fixture.Staging(guid, image, callback).Merge(map[string]any{
		"app_guid": fixture.NewGUID(), "org_guid": fixture.NewGUID(), "space_guid": fixture.NewGUID(),
	})
	if username != "" {
		body.WithRegistryCredentials(username, password)
	}
	return body.JSON()
}

var _ = Describe("Docker staging", Ordered, func() {
	const (
		registryUser     = "stager"
		registryPassword = "registry-s3cret-pw"
	)
	var (
		o                   *opiServer
		cc                  *ccstandin.Server
		public, private     *registry.Registry
		hostile             *registry.Registry
		publicRef, privRef  string
		expectedExecutionMD string
	)

	callbackPath := func(guid string) string { return "/internal/v3/staging/" + guid + "/build_completed" }
	callbackURL := func(guid string) string { return cc.URL + callbackPath(guid) + "?start=true" }
	stagingRecords := func() []string {
		list, err := kube.CoreV1().Secrets(o.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "opi-bridge.io/source-type=STG"})
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, s := range list.Items {
			names = append(names, s.Name)
		}
		return names
	}
	// accepted is the body of the one callback CC accepted for guid, once there is one.
	accepted := func(guid string) string {
		var body string
		Eventually(func() int {
			got := cc.Accepted(callbackPath(guid))
			if len(got) > 0 {
				body = string(got[0].Body)
			}
			return len(got)
		}).Should(Equal(1), "opi said:\n%s", o.Logs())
		return body
	}
	stage := func(guid, body string) {
		status, answer := o.call("POST", "/stage/"+guid, body)
		Expect(status).To(Equal(http.StatusAccepted), answer)
		Expect(answer).To(MatchJSON(`{}`))
	}

	BeforeAll(func() {
		cc = startCC()

		var err error
		public, err = registry.Start(registry.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(public.Close)
		private, err = registry.Start(registry.Options{Username: registryUser, Password: registryPassword})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(private.Close)

		image := registry.Image{
			Cmd: []string{"--port", "8080"}, Entrypoint: []string{"/bin/hello"}, WorkingDir: "/srv", User: "1000",
			ExposedPorts: []string{"8080/tcp", "9090/udp"},
		}
		publicRef, err = public.Push("sample/hello:v1", image)
		Expect(err).NotTo(HaveOccurred())
		privRef, err = private.Push("team/secret-app:v1", image)
		Expect(err).NotTo(HaveOccurred())
		expectedExecutionMD = `{"cmd":["--port","8080"],"entrypoint":["/bin/hello"],"workdir":"/srv","user":"1000","ports":[{"Port":8080,"Protocol":"tcp"},{"Port":9090,"Protocol":"udp"}]}`

		hostile, err = registry.Start(registry.Options{Hostile: registry.EndlessConfig})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(hostile.Close)

		o = startOpi(newNamespace(), append(append(cc.OpiArgs(),
			"--leader-lease-duration", "4s", "--leader-renew-deadline", "3s", "--leader-retry-period", "1s"),
			// Loopback registries are refused unless allowed: these are, explicitly.
			registry.OpiArgs(public, private, hostile)...)...)
	})

	successBody := func(image string) string {
		encoded, err := json.Marshal(map[string]any{"result": map[string]any{
			"lifecycle_type":     "docker",
			"lifecycle_metadata": map[string]string{"docker_image": image},
			"process_types":      map[string]string{"web": ""},
			"execution_metadata": expectedExecutionMD,
		}})
		Expect(err).NotTo(HaveOccurred())
		return string(encoded)
	}

	It("answers 202, tells CC what the image runs, and keeps nothing once CC has it", func() {
		guid := fixture.NewGUID()
		stage(guid, stagingBody(guid, publicRef, "", "", callbackURL(guid)))

		body := accepted(guid)
		Expect(body).To(MatchJSON(successBody(publicRef)))
		var result struct {
			Result struct {
				ExecutionMetadata string `json:"execution_metadata"`
			} `json:"result"`
		}
		Expect(json.Unmarshal([]byte(body), &result)).To(Succeed())
		Expect(result.Result.ExecutionMetadata).To(Equal(expectedExecutionMD))
		Eventually(stagingRecords).Should(BeEmpty())
	})

	It("stages a private image with the request's credentials, and never shows them", func() {
		guid := fixture.NewGUID()
		stage(guid, stagingBody(guid, privRef, registryUser, registryPassword, callbackURL(guid)))

		Expect(accepted(guid)).To(MatchJSON(successBody(privRef)))
		Expect(o.Logs()).NotTo(ContainSubstring(registryPassword))
	})

	It("tells CC a StagingError when the registry refuses the credentials", func() {
		guid := fixture.NewGUID()
		stage(guid, stagingBody(guid, privRef, registryUser, "wrong-pw", callbackURL(guid)))

		Expect(accepted(guid)).To(MatchJSON(`{"error":{"id":"StagingError","message":"the image's registry refused the credentials"}}`))
		Eventually(stagingRecords).Should(BeEmpty())
	})

	It("tells CC a StagingError for an image the registry does not have", func() {
		guid := fixture.NewGUID()
		unknown := public.Host + "/sample/hello:nope"
		stage(guid, stagingBody(guid, unknown, "", "", callbackURL(guid)))

		Expect(accepted(guid)).To(MatchJSON(`{"error":{"id":"StagingError","message":"the image was not found"}}`))
	})

	It("tells CC the image is too large when a registry declares a 1 TiB config and streams it without end, and stays up", func() {
		guid := fixture.NewGUID()
		stage(guid, stagingBody(guid, hostile.Host+"/huge/config:v1", "", "", callbackURL(guid)))

		Expect(accepted(guid)).To(MatchJSON(`{"error":{"id":"StagingError","message":"the image's manifest or configuration is too large"}}`))
		Eventually(stagingRecords).Should(BeEmpty())
		status, _ := o.call("GET", "/apps", "")
		Expect(status).To(Equal(http.StatusOK))
	})

	It("tells CC the registry is not allowed for an address opi is not allowed to reach, without contacting it", func() {
		// 127.0.0.2 is loopback, outside the one address each registry above is allowed.
		probe, err := registry.Start(registry.Options{Addr: "127.0.0.2:0"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(probe.Close)
		image := probe.Host + "/sample/hello:v1"
		metadataRef := "169.254.169.254/latest/meta-data:v1"

		for _, ref := range []string{image, metadataRef} {
			guid := fixture.NewGUID()
			stage(guid, stagingBody(guid, ref, "", "", callbackURL(guid)))
			Expect(accepted(guid)).To(MatchJSON(`{"error":{"id":"StagingError","message":"the image's registry is not allowed"}}`))
		}
		Expect(probe.Connections()).To(BeZero())
	})

	It("answers a buildpack staging with 400 and writes nothing", func() {
		guid := fixture.NewGUID()
		body := fixture.Staging(guid, publicRef, callbackURL(guid)).Set("lifecycle", map[string]any{
			"buildpack_lifecycle": map[string]any{"buildpacks": []string{"ruby_buildpack"}, "stack": "cflinuxfs4"},
		}).JSON()

		status, answer := o.call("POST", "/stage/"+guid, body)
		Expect(status).To(Equal(http.StatusBadRequest))
		Expect(answer).To(MatchJSON(`{"message":"lifecycle buildpack_lifecycle is not supported: opi stages docker images only (docker_lifecycle)"}`))
		// This staging's record, not the namespace's: an earlier spec's may still be going.
		Expect(stagingRecords()).NotTo(ContainElement("staging-" + guid))
	})

	It("loses nothing when opi is killed between accepting a staging and CC accepting its result", func() {
		guid := fixture.NewGUID()
		cc.FailNext(callbackPath(guid), 1000, http.StatusServiceUnavailable)
		stage(guid, stagingBody(guid, privRef, registryUser, registryPassword, callbackURL(guid)))
		Eventually(func() int { return len(cc.CallbacksTo(callbackPath(guid))) }).Should(BeNumerically(">=", 1))
		Expect(stagingRecords()).To(ConsistOf("staging-" + guid))

		o.kill()
		cc.FailNext(callbackPath(guid), 0, http.StatusServiceUnavailable)
		o.start()

		Expect(accepted(guid)).To(MatchJSON(successBody(privRef)))
		Eventually(stagingRecords).Should(BeEmpty())
	})

	It("takes a second request for a pending staging as a no-op success", func() {
		guid := fixture.NewGUID()
		cc.FailNext(callbackPath(guid), 1000, http.StatusServiceUnavailable)
		body := stagingBody(guid, publicRef, "", "", callbackURL(guid))
		stage(guid, body)
		stage(guid, body)
		Expect(stagingRecords()).To(ConsistOf("staging-" + guid))

		cc.FailNext(callbackPath(guid), 0, http.StatusServiceUnavailable)
		Expect(accepted(guid)).To(MatchJSON(successBody(publicRef)))
		Eventually(stagingRecords).Should(BeEmpty())
	})
})
