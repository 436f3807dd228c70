package lrp_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"code.cloudfoundry.org/lager/v3/lagertest"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	typedappsv1 "k8s.io/client-go/kubernetes/typed/apps/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/watchlist"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s"
	"github.com/opi-bridge/opi/k8s/internal/backendtest"
	"github.com/opi-bridge/opi/k8s/internal/objects"
	"github.com/opi-bridge/opi/k8s/internal/store"
	"github.com/opi-bridge/opi/k8s/names"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("DesireLRP", func() {
	var (
		ctx     context.Context
		client  *fake.Clientset
		backend *k8s.Backend
		lrp     *opi.LRP
		name    string
		before  int
	)

	BeforeEach(func() {
		ctx = context.Background()
		client = backendtest.NewClient()
		backend = backendtest.StartBackend(client)
		lrp = backendtest.SampleLRP()
		name = names.DeploymentName(lrp)
		before = len(client.Actions())
	})

	desire := func() *appsv1.Deployment {
		ExpectWithOffset(1, backend.DesireLRP(ctx, lrp)).To(Succeed())
		return backendtest.GetDeployment(client, name)
	}

	wantLabels := func() map[string]string {
		return map[string]string{
			"opi-bridge.io/guid":           lrp.GUID,
			"opi-bridge.io/version":        lrp.Version,
			"opi-bridge.io/app-guid":       lrp.AppGUID,
			"opi-bridge.io/process-type":   "web",
			"opi-bridge.io/source-type":    "APP",
			"app.kubernetes.io/managed-by": "opi",
		}
	}

	It("creates the deployment and the env secret at once, then at once the service and the budget, each owned from its creation", func() {
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, before), "create deployments "+name, []backendtest.Step{
			{"create secrets " + name + "-env"},
		}, []backendtest.Step{
			{"create services " + name},
			{"create poddisruptionbudgets " + name},
		})
		d := backendtest.GetDeployment(client, name)
		Expect(backendtest.GetSecret(client, name+"-env").OwnerReferences).To(BeEmpty(), "created beside the deployment, before its uid is known")
		Expect(metav1.IsControlledBy(backendtest.GetService(client, name), d)).To(BeTrue())
	})

	It("makes the deployment readable as soon as it returns", func() {
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		got, err := backend.GetLRP(ctx, lrp.LRPIdentifier)
		Expect(err).NotTo(HaveOccurred())
		Expect(got.ProcessGUID()).To(Equal(lrp.ProcessGUID()))
		lrps, err := backend.ListLRPs(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(lrps).To(HaveLen(1))
	})

	Describe("the deployment", func() {
		It("has the deterministic name, labels and annotations", func() {
			d := desire()
			Expect(d.Name).To(HavePrefix("my-app-dev-"))
			Expect(d.Namespace).To(Equal(backendtest.Namespace))
			Expect(d.Labels).To(Equal(wantLabels()))
			Expect(d.Annotations).To(Equal(map[string]string{
				"opi-bridge.io/process-guid": lrp.ProcessGUID(),
				"opi-bridge.io/last-updated": "1600000000.2499998",
				"opi-bridge.io/process-type": "web",
				"opi-bridge.io/app-name":     "My App",
				"opi-bridge.io/space-name":   "dev",
				"opi-bridge.io/space-guid":   "space-guid-1",
				"opi-bridge.io/org-name":     "acme",
				"opi-bridge.io/org-guid":     "org-guid-1",
				"opi-bridge.io/routes":       `[{"hostname":"app.example.com","port":8080}]`,
				"opi-bridge.io/health-check": `{"type":"http","endpoint":"/health","timeout_ms":2500,"start_timeout_ms":90000}`,
			}))
		})

		It("runs the desired replicas of the image, selected by guid and version", func() {
			d := desire()
			Expect(*d.Spec.Replicas).To(Equal(int32(2)))
			Expect(d.Spec.Selector.MatchLabels).To(Equal(map[string]string{
				"opi-bridge.io/guid":    lrp.GUID,
				"opi-bridge.io/version": lrp.Version,
			}))
			Expect(*d.Spec.RevisionHistoryLimit).To(Equal(int32(2)))
			Expect(d.Spec.Strategy).To(Equal(appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       ptr.To(intstr.FromInt32(1)),
					MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				},
			}), "a rollout surges one pod and never has fewer available than desired")
			Expect(d.Spec.MinReadySeconds).To(Equal(int32(10)))
			Expect(d.Spec.Template.Labels).To(Equal(wantLabels()))
			Expect(d.Spec.Template.Annotations).To(Equal(map[string]string{"example.com/team": "blue"}))

			Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
			c := d.Spec.Template.Spec.Containers[0]
			Expect(c.Name).To(Equal("opi"))
			Expect(c.Image).To(Equal("busybox:1.36"))
			Expect(c.Ports).To(Equal([]corev1.ContainerPort{
				{ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
				{ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
			}))
		})

		It("escapes '$' in the command so Kubernetes passes it to the shell unchanged", func() {
			c := desire().Spec.Template.Spec.Containers[0]
			Expect(c.Command).To(Equal([]string{"/bin/sh", "-c", "echo $$PORT $$(date); sleep 1d"}))
			got, err := backend.GetLRP(ctx, lrp.LRPIdentifier)
			Expect(err).NotTo(HaveOccurred())
			Expect(got.Command).To(Equal(lrp.Command))
		})

		It("leaves the image's entrypoint when there is no command", func() {
			lrp.Command = nil
			Expect(desire().Spec.Template.Spec.Containers[0].Command).To(BeNil())
		})

		diegoCaps := []corev1.Capability{
			"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
			"NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
		}

		It("is locked down, with Diego's default capabilities so that root images run", func() {
			pod := desire().Spec.Template.Spec
			Expect(*pod.TerminationGracePeriodSeconds).To(Equal(int64(10)))
			Expect(*pod.AutomountServiceAccountToken).To(BeFalse())
			Expect(*pod.EnableServiceLinks).To(BeFalse())
			Expect(pod.SecurityContext).To(Equal(&corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			}))
			Expect(pod.Containers[0].SecurityContext).To(Equal(&corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: diegoCaps},
			}))
			Expect(pod.ImagePullSecrets).To(BeEmpty())
		})

		Context("under the restricted pod security level", func() {
			BeforeEach(func() {
				client = backendtest.NewClient()
				backend = backendtest.StartBackendWith(client, k8s.Options{Pods: objects.PodOptions{PodSecurity: objects.PodSecurityRestricted}})
			})

			It("runs as non-root with every capability dropped", func() {
				pod := desire().Spec.Template.Spec
				Expect(pod.SecurityContext).To(Equal(&corev1.PodSecurityContext{
					RunAsNonRoot:   ptr.To(true),
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				}))
				Expect(*pod.AutomountServiceAccountToken).To(BeFalse())
				Expect(pod.Containers[0].SecurityContext).To(Equal(&corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				}))
			})

			It("gives back only the capability to bind a port below 1024, when the app has one", func() {
				lrp.Ports = []int32{8080, 80}
				Expect(desire().Spec.Template.Spec.Containers[0].SecurityContext.Capabilities).To(Equal(&corev1.Capabilities{
					Drop: []corev1.Capability{"ALL"},
					Add:  []corev1.Capability{"NET_BIND_SERVICE"},
				}))
			})
		})

		It("requests memory (= limit), disk as ephemeral storage, and cpu without a limit", func() {
			res := desire().Spec.Template.Spec.Containers[0].Resources
			Expect(res.Requests.Memory().String()).To(Equal("256Mi"))
			Expect(res.Limits.Memory().String()).To(Equal("256Mi"))
			Expect(res.Limits.StorageEphemeral().String()).To(Equal("1Gi"))
			Expect(res.Requests.Cpu().MilliValue()).To(Equal(int64(250)))
			Expect(res.Limits).NotTo(HaveKey(corev1.ResourceCPU))
		})

		It("has no disk limit when disk_mb is 0", func() {
			lrp.DiskMB = 0
			Expect(desire().Spec.Template.Spec.Containers[0].Resources.Limits).NotTo(HaveKey(corev1.ResourceEphemeralStorage))
		})

		DescribeTable("cpu request is cpu_weight*10 millicores, at least 10m",
			func(weight int32, millis int64) {
				lrp.CPUWeight = weight
				Expect(desire().Spec.Template.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()).To(Equal(millis))
			},
			Entry("0", int32(0), int64(10)),
			Entry("1", int32(1), int64(10)),
			Entry("25", int32(25), int64(250)),
			Entry("100 is one core", int32(100), int64(1000)),
		)
	})

	Describe("env", func() {
		It("references every app variable from the env secret, by name, then the platform's", func() {
			d := desire()
			env := d.Spec.Template.Spec.Containers[0].Env
			names := []string{}
			for _, e := range env {
				names = append(names, e.Name)
				Expect(e.Value == "" || strings.HasPrefix(e.Name, "CF_INSTANCE_")).To(BeTrue(), e.Name+" has a plain value")
			}
			Expect(names).To(Equal([]string{
				"FOO", "VCAP_SERVICES", "a:b", "spring.profiles.active", "x.y",
				"CF_INSTANCE_GUID", "CF_INSTANCE_IP", "CF_INSTANCE_INTERNAL_IP",
				"CF_INSTANCE_PORT", "CF_INSTANCE_ADDR", "CF_INSTANCE_PORTS",
			}))

			secret := backendtest.GetSecret(client, name+"-env")
			Expect(secret.Type).To(Equal(corev1.SecretTypeOpaque))
			Expect(secret.Labels).To(Equal(wantLabels()))
			Expect(secret.Data).To(HaveLen(5))
			keys := map[string]string{}
			for _, e := range env[:5] {
				ref := e.ValueFrom.SecretKeyRef
				Expect(ref.Name).To(Equal(name + "-env"))
				Expect(validation.IsConfigMapKey(ref.Key)).To(BeEmpty())
				Expect(keys).NotTo(HaveKey(ref.Key))
				keys[ref.Key] = e.Name
				Expect(string(secret.Data[ref.Key])).To(Equal(lrp.Env[e.Name]), e.Name)
			}
			Expect(keys).To(HaveKeyWithValue("FOO", "FOO"))
			Expect(keys).To(HaveKeyWithValue("spring.profiles.active", "spring.profiles.active"))
			Expect(keys).NotTo(HaveKey("x.y"), "a name with the reserved prefix is encoded")
			Expect(env[2].ValueFrom.SecretKeyRef.Key).To(MatchRegexp(`^x\.[a-z2-7]+$`))
		})

		It("sets the platform variables, overriding the app's", func() {
			env := desire().Spec.Template.Spec.Containers[0].Env
			Expect(env[5:]).To(Equal([]corev1.EnvVar{
				{Name: "CF_INSTANCE_GUID", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.uid"}}},
				{Name: "CF_INSTANCE_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.hostIP"}}},
				{Name: "CF_INSTANCE_INTERNAL_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
				{Name: "CF_INSTANCE_PORT", Value: "8080"},
				{Name: "CF_INSTANCE_ADDR", Value: "$(CF_INSTANCE_INTERNAL_IP):8080"},
				{Name: "CF_INSTANCE_PORTS", Value: `[{"external":8080,"internal":8080},{"external":9090,"internal":9090}]`},
			}))
			Expect(backendtest.GetSecret(client, name+"-env").Data).NotTo(HaveKey("CF_INSTANCE_PORT"))
		})

		It("keeps env values and credentials out of every label and annotation", func() {
			lrp.PrivateRegistry = &opi.PrivateRegistry{Username: "user", Password: "registry-pw"}
			d := desire()
			var meta []map[string]string
			meta = append(meta, d.Labels, d.Annotations, d.Spec.Template.Labels, d.Spec.Template.Annotations)
			for _, s := range []string{name + "-env", name + "-registry"} {
				secret := backendtest.GetSecret(client, s)
				meta = append(meta, secret.Labels, secret.Annotations)
			}
			svc := backendtest.GetService(client, name)
			meta = append(meta, svc.Labels, svc.Annotations)
			secrets := []string{"registry-pw", "s3cr3t-pw"}
			for _, v := range lrp.Env {
				secrets = append(secrets, v)
			}
			for _, m := range meta {
				for k, v := range m {
					for _, s := range secrets {
						Expect(v).NotTo(ContainSubstring(s), k)
					}
				}
			}
		})

		It("maps a name too long to encode to a hashed key", func() {
			long := strings.Repeat("a:", 100)
			lrp.Env = map[string]string{long: "long-value"}
			env := desire().Spec.Template.Spec.Containers[0].Env
			Expect(env[0].Name).To(Equal(long))
			key := env[0].ValueFrom.SecretKeyRef.Key
			Expect(key).To(MatchRegexp(`^h\.[0-9a-f]{64}$`))
			Expect(backendtest.GetSecret(client, name+"-env").Data).To(Equal(map[string][]byte{key: []byte("long-value")}))
		})

		It("omits the port variables when there is no port", func() {
			lrp.Ports = nil
			env := desire().Spec.Template.Spec.Containers[0].Env
			for _, e := range env {
				Expect(e.Name).NotTo(BeElementOf("CF_INSTANCE_ADDR", "CF_INSTANCE_PORTS"))
			}
			Expect(env[len(env)-1].Name).To(Equal("CF_INSTANCE_INTERNAL_IP"))
			Expect(backendtest.GetSecret(client, name+"-env").Data).To(HaveKeyWithValue("CF_INSTANCE_PORT", []byte("user-instance-port")),
				"the app's own value stands when the platform sets none")
		})
	})

	Describe("probes", func() {
		tcp := corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}
		httpGet := func(path string) corev1.ProbeHandler {
			return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(8080)}}
		}

		DescribeTable("follow the health check type; the start timeout bounds only the startup probe, each check takes at most a second",
			func(health opi.HealthCheck, handler *corev1.ProbeHandler, startupFailures int32) {
				lrp.Health = health
				c := desire().Spec.Template.Spec.Containers[0]
				if handler == nil {
					Expect(c.StartupProbe).To(BeNil())
					Expect(c.LivenessProbe).To(BeNil())
					Expect(c.ReadinessProbe).To(BeNil())
					return
				}
				Expect(c.StartupProbe).To(Equal(&corev1.Probe{
					ProbeHandler: *handler, TimeoutSeconds: 1, PeriodSeconds: 2, FailureThreshold: startupFailures,
				}))
				Expect(c.LivenessProbe).To(Equal(&corev1.Probe{
					ProbeHandler: *handler, TimeoutSeconds: 1, PeriodSeconds: 10, FailureThreshold: 3,
				}))
				Expect(c.ReadinessProbe).To(Equal(&corev1.Probe{
					ProbeHandler: *handler, TimeoutSeconds: 1, PeriodSeconds: 5, FailureThreshold: 2,
				}))
			},
			Entry("port: start_timeout_ms bounds the start", opi.HealthCheck{Type: "port", TimeoutMs: 61000, StartTimeoutMs: 61000}, &tcp, int32(31)),
			Entry("port: health_check_timeout_ms alone is the start timeout", opi.HealthCheck{Type: "port", TimeoutMs: 180000}, &tcp, int32(90)),
			Entry("port with defaults: 60 s to start", opi.HealthCheck{Type: "port"}, &tcp, int32(30)),
			Entry("http on the endpoint", opi.HealthCheck{Type: "http", Endpoint: "/health", TimeoutMs: 2500, StartTimeoutMs: 90000}, ptr.To(httpGet("/health")), int32(45)),
			Entry("http defaults to /", opi.HealthCheck{Type: "http"}, ptr.To(httpGet("/")), int32(30)),
			Entry("process has none: Ready once started, minReadySeconds guards rollouts", opi.HealthCheck{Type: "process"}, nil, int32(0)),
			Entry("none has none", opi.HealthCheck{Type: "none"}, nil, int32(0)),
		)

		Context("with an operator's check timeout and minimum ready time", func() {
			BeforeEach(func() {
				client = backendtest.NewClient()
				backend = backendtest.StartBackendWith(client, k8s.Options{Pods: objects.PodOptions{ProbeTimeout: 1500 * time.Millisecond, MinReady: 30 * time.Second}})
			})

			It("bounds every check by it, rounded up to whole seconds", func() {
				lrp.Health = opi.HealthCheck{Type: "port", StartTimeoutMs: 10000}
				d := desire()
				c := d.Spec.Template.Spec.Containers[0]
				Expect(c.StartupProbe.TimeoutSeconds).To(Equal(int32(2)))
				Expect(c.LivenessProbe.TimeoutSeconds).To(Equal(int32(2)))
				Expect(c.ReadinessProbe.TimeoutSeconds).To(Equal(int32(2)))
				Expect(c.StartupProbe.FailureThreshold).To(Equal(int32(5)))
				Expect(d.Spec.MinReadySeconds).To(Equal(int32(30)))
			})
		})

		It("are absent when the LRP has no port", func() {
			lrp.Ports = nil
			lrp.Health = opi.HealthCheck{Type: "port"}
			Expect(desire().Spec.Template.Spec.Containers[0].StartupProbe).To(BeNil())
		})
	})

	Describe("ownership and the service", func() {
		It("leaves the env secret owned by nothing, named after the deployment and labelled as it", func() {
			d := desire()
			secret := backendtest.GetSecret(client, name+"-env")
			Expect(secret.OwnerReferences).To(BeEmpty())
			Expect(secret.Labels).To(Equal(d.Labels))
		})

		It("creates a ClusterIP service with one port per LRP port, owned by the deployment", func() {
			d := desire()
			svc := backendtest.GetService(client, name)
			Expect(svc.Labels).To(Equal(wantLabels()))
			Expect(metav1.IsControlledBy(svc, d)).To(BeTrue())
			Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
			Expect(svc.Spec.Selector).To(Equal(d.Spec.Selector.MatchLabels))
			Expect(svc.Spec.Ports).To(Equal([]corev1.ServicePort{
				{Name: "port-8080", Protocol: corev1.ProtocolTCP, Port: 8080, TargetPort: intstr.FromInt32(8080)},
				{Name: "port-9090", Protocol: corev1.ProtocolTCP, Port: 9090, TargetPort: intstr.FromInt32(9090)},
			}))
		})

		It("creates no service when the LRP has no port", func() {
			lrp.Ports = nil
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, before), "create deployments "+name, []backendtest.Step{
				{"create secrets " + name + "-env"},
			}, []backendtest.Step{
				{"create poddisruptionbudgets " + name},
			})
			_, _, services := backendtest.CountObjects(client)
			Expect(services).To(BeZero())
		})
	})

	Describe("the pod disruption budget", func() {
		It("lets a drain take one instance at a time, owned by the deployment", func() {
			d := desire()
			pdb, err := client.PolicyV1().PodDisruptionBudgets(backendtest.Namespace).Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(pdb.Labels).To(Equal(wantLabels()))
			Expect(metav1.IsControlledBy(pdb, d)).To(BeTrue())
			Expect(pdb.Spec).To(Equal(policyv1.PodDisruptionBudgetSpec{
				Selector:       &metav1.LabelSelector{MatchLabels: d.Spec.Selector.MatchLabels},
				MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			}))
		})

		It("is not made for a 1-instance app, whose only instance a drain must be able to move", func() {
			lrp.Instances = 1
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			Expect(backendtest.ActionsSince(client, before)).NotTo(ContainElement(HavePrefix("create poddisruptionbudgets")))
			list, err := client.PolicyV1().PodDisruptionBudgets(backendtest.Namespace).List(ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(list.Items).To(BeEmpty())
		})
	})

	Describe("a private registry", func() {
		BeforeEach(func() {
			lrp.PrivateRegistry = &opi.PrivateRegistry{Username: "user", Password: "registry-pw"}
		})

		It("creates a dockerconfigjson secret, references it and owns it", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, before), "create deployments "+name, []backendtest.Step{
				{"create secrets " + name + "-env"},
				{"create secrets " + name + "-registry"},
			}, []backendtest.Step{
				{"create services " + name},
				{"create poddisruptionbudgets " + name},
			})
			d := backendtest.GetDeployment(client, name)
			Expect(d.Spec.Template.Spec.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: name + "-registry"}}))

			secret := backendtest.GetSecret(client, name+"-registry")
			Expect(secret.Type).To(Equal(corev1.SecretTypeDockerConfigJson))
			Expect(secret.Labels).To(Equal(wantLabels()))
			Expect(secret.OwnerReferences).To(BeEmpty())
			Expect(dockerConfig(secret)).To(Equal(map[string]map[string]string{
				"https://index.docker.io/v1/": {
					"username": "user",
					"password": "registry-pw",
					"auth":     base64.StdEncoding.EncodeToString([]byte("user:registry-pw")),
				},
			}))
		})

		DescribeTable("keys the credentials by the image's registry",
			func(image, server, want string) {
				lrp.Image = image
				lrp.PrivateRegistry.Server = server
				Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
				Expect(dockerConfig(backendtest.GetSecret(client, name+"-registry"))).To(HaveKey(want))
			},
			Entry("docker hub short name", "busybox", "", "https://index.docker.io/v1/"),
			Entry("docker hub user image", "library/busybox:1", "", "https://index.docker.io/v1/"),
			Entry("docker.io", "docker.io/library/busybox", "", "https://index.docker.io/v1/"),
			Entry("a registry host", "registry.example.com/team/app:1", "", "registry.example.com"),
			Entry("a registry host with port", "localhost:5000/app", "", "localhost:5000"),
			Entry("an explicit server", "busybox", "my.registry.io", "my.registry.io"),
		)
	})

	Describe("idempotency", func() {
		It("succeeds and changes nothing when desired again", func() {
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			first := backendtest.GetDeployment(client, name)
			before = len(client.Actions())

			changed := backendtest.SampleLRP()
			changed.Instances = 7
			Expect(backend.DesireLRP(ctx, changed)).To(Succeed())
			backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, before), "create deployments "+name, []backendtest.Step{
				// left owned by nothing by the first desire, and so by this one
				{"create secrets " + name + "-env", "get secrets " + name + "-env"},
			}, []backendtest.Step{
				{"create services " + name, "get services " + name},
				{"create poddisruptionbudgets " + name, "get poddisruptionbudgets " + name},
			})
			Expect(backendtest.GetDeployment(client, name)).To(Equal(first))
			Expect(backendtest.GetSecret(client, name+"-env").OwnerReferences).To(BeEmpty())
			deployments, secrets, services := backendtest.CountObjects(client)
			Expect([]int{deployments, secrets, services}).To(Equal([]int{1, 1, 1}))
		})

		It("owns an env secret that exists without an owner (an interrupted desire's), keeping it", func() {
			secret := &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name + "-env", Namespace: backendtest.Namespace, Labels: wantLabels()},
				Data:       map[string][]byte{"FOO": []byte("foo-value")},
			}
			old, err := client.CoreV1().Secrets(backendtest.Namespace).Create(ctx, secret, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			before = len(client.Actions())

			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, before), "create deployments "+name, []backendtest.Step{
				// not made by this call: read for its version, then owned by a conditional patch
				{"create secrets " + name + "-env", "get secrets " + name + "-env", "patch secrets " + name + "-env"},
			}, []backendtest.Step{
				{"create services " + name},
				{"create poddisruptionbudgets " + name},
			})
			d := backendtest.GetDeployment(client, name)
			owned := backendtest.GetSecret(client, name+"-env")
			Expect(metav1.IsControlledBy(owned, d)).To(BeTrue())
			Expect(owned.UID).To(Equal(old.UID), "owned in place, not made again")
			Expect(metav1.IsControlledBy(backendtest.GetService(client, name), d)).To(BeTrue())
		})

		It("completes a desire interrupted after the deployment", func() {
			// What round 1 of a desire leaves behind: the Deployment and nothing else.
			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			d := backendtest.GetDeployment(client, name)
			Expect(client.CoreV1().Secrets(backendtest.Namespace).Delete(ctx, name+"-env", metav1.DeleteOptions{})).To(Succeed())
			Expect(client.CoreV1().Services(backendtest.Namespace).Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
			Expect(client.PolicyV1().PodDisruptionBudgets(backendtest.Namespace).Delete(ctx, name, metav1.DeleteOptions{})).To(Succeed())
			before = len(client.Actions())

			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			backendtest.ExpectDesireCalls(backendtest.ActionsSince(client, before), "create deployments "+name, []backendtest.Step{
				{"create secrets " + name + "-env"},
			}, []backendtest.Step{
				{"create services " + name},
				{"create poddisruptionbudgets " + name},
			})
			Expect(backendtest.GetDeployment(client, name)).To(Equal(d), "the deployment is left as it was")
			Expect(backendtest.GetSecret(client, name+"-env").OwnerReferences).To(BeEmpty())
			Expect(metav1.IsControlledBy(backendtest.GetService(client, name), d)).To(BeTrue())
			pdb, err := client.PolicyV1().PodDisruptionBudgets(backendtest.Namespace).Get(ctx, name, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(metav1.IsControlledBy(pdb, d)).To(BeTrue())
		})

		It("replaces a stale owner left by a deleted deployment of the same name", func() {
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
				Name: name + "-env", Namespace: backendtest.Namespace, Labels: wantLabels(),
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "apps/v1", Kind: "Deployment", Name: name, UID: "old-uid", Controller: ptr.To(true),
				}},
			}}
			old, err := client.CoreV1().Secrets(backendtest.Namespace).Create(ctx, secret, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())

			Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
			d := backendtest.GetDeployment(client, name)
			fresh := backendtest.GetSecret(client, name+"-env")
			owners := fresh.OwnerReferences
			Expect(owners).To(HaveLen(1))
			Expect(owners[0].UID).To(Equal(d.UID))
			// Made again, not moved: the garbage collector may be deleting the old one.
			Expect(fresh.UID).NotTo(Equal(old.UID))
			Expect(fresh.Data).To(HaveKeyWithValue("FOO", []byte("foo-value")))
		})

		It("refuses a deployment of the same name that belongs to another LRP", func() {
			other := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: backendtest.Namespace,
				Labels: map[string]string{"opi-bridge.io/source-type": "APP", "opi-bridge.io/guid": "other", "opi-bridge.io/version": "v"},
			}}
			_, err := client.AppsV1().Deployments(backendtest.Namespace).Create(ctx, other, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			Expect(backend.DesireLRP(ctx, lrp)).To(MatchError(ContainSubstring("does not belong to this lrp")))
		})
	})
})

var _ = Describe("DesireLRP's first round", func() {
	It("writes the deployment and the env secret at once", func() {
		// Each create waits until the other has been called: only writes made at once both
		// get through. The bound only ends a wait that would otherwise never end.
		fakeClient := backendtest.NewClient()
		client := newGatedClient(fakeClient, true)
		ctx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		backend := backendtest.MustBackend(client, lagertest.NewTestLogger("k8s"), k8s.Options{Namespace: backendtest.Namespace, Store: store.Options{ReadWaitTimeout: 2 * time.Second}})
		Expect(backend.Start(ctx)).To(Succeed())

		lrp := backendtest.SampleLRP()
		name := names.DeploymentName(lrp)
		Expect(backend.DesireLRP(ctx, lrp)).To(Succeed())
		d := backendtest.GetDeployment(fakeClient, name)
		Expect(backendtest.GetSecret(fakeClient, name+"-env").Labels).To(Equal(d.Labels))
		Expect(metav1.IsControlledBy(backendtest.GetService(fakeClient, name), d)).To(BeTrue())
	})
})

// gatedClient is a client whose Deployment and Secret creates wait for each other: with
// meet, each waits until the other has been called (at most gateBound, then fails); else a
// Secret create waits until the Deployment create has returned, so that a spec can put
// round 1's writes in the order it needs (a fake's reactors cannot wait: they hold its lock).
type gatedClient struct {
	kubernetes.Interface
	meet                                                 bool
	deploymentCalled, deploymentDone, secretCalled       chan struct{}
	deploymentCalledOnce, deploymentDoneOnce, secretOnce sync.Once
}

const gateBound = 20 * time.Second

func newGatedClient(c kubernetes.Interface, meet bool) *gatedClient {
	return &gatedClient{Interface: c, meet: meet, deploymentCalled: make(chan struct{}), deploymentDone: make(chan struct{}), secretCalled: make(chan struct{})}
}

// IsWatchListSemanticsUnSupported passes on what the fake says of watch lists, which its
// informers ask of the client they are given.
func (c *gatedClient) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.Interface)
}

func (c *gatedClient) CoreV1() typedcorev1.CoreV1Interface {
	return gatedCore{CoreV1Interface: c.Interface.CoreV1(), c: c}
}

func (c *gatedClient) AppsV1() typedappsv1.AppsV1Interface {
	return gatedApps{AppsV1Interface: c.Interface.AppsV1(), c: c}
}

type gatedCore struct {
	typedcorev1.CoreV1Interface
	c *gatedClient
}

func (g gatedCore) Secrets(ns string) typedcorev1.SecretInterface {
	return gatedSecrets{SecretInterface: g.CoreV1Interface.Secrets(ns), c: g.c}
}

type gatedApps struct {
	typedappsv1.AppsV1Interface
	c *gatedClient
}

func (g gatedApps) Deployments(ns string) typedappsv1.DeploymentInterface {
	return gatedDeployments{DeploymentInterface: g.AppsV1Interface.Deployments(ns), c: g.c}
}

type gatedSecrets struct {
	typedcorev1.SecretInterface
	c *gatedClient
}

func (s gatedSecrets) Create(ctx context.Context, secret *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error) {
	s.c.secretOnce.Do(func() { close(s.c.secretCalled) })
	wait := s.c.deploymentDone
	if s.c.meet {
		wait = s.c.deploymentCalled
	}
	if err := gate(wait, "secret", "deployment"); err != nil {
		return nil, err
	}
	return s.SecretInterface.Create(ctx, secret, opts)
}

type gatedDeployments struct {
	typedappsv1.DeploymentInterface
	c *gatedClient
}

func (d gatedDeployments) Create(ctx context.Context, deployment *appsv1.Deployment, opts metav1.CreateOptions) (*appsv1.Deployment, error) {
	d.c.deploymentCalledOnce.Do(func() { close(d.c.deploymentCalled) })
	defer d.c.deploymentDoneOnce.Do(func() { close(d.c.deploymentDone) })
	if d.c.meet {
		if err := gate(d.c.secretCalled, "deployment", "secret"); err != nil {
			return nil, err
		}
	}
	return d.DeploymentInterface.Create(ctx, deployment, opts)
}

// gate waits until other is closed; an error (not a hang) when it is not within gateBound.
func gate(other <-chan struct{}, mine, theirs string) error {
	select {
	case <-other:
		return nil
	case <-time.After(gateBound):
		return fmt.Errorf("the %s create waited %s for the %s create", mine, gateBound, theirs)
	}
}

func dockerConfig(secret *corev1.Secret) map[string]map[string]string {
	var config struct {
		Auths map[string]map[string]string `json:"auths"`
	}
	ExpectWithOffset(1, json.Unmarshal(secret.Data[corev1.DockerConfigJsonKey], &config)).To(Succeed())
	return config.Auths
}
