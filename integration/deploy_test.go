package integration_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	standin "github.com/opi-bridge/opi/testsupport/loggregator"
	"github.com/opi-bridge/opi/testsupport/pki"
)

// The manifests' namespace: the overlay is applied as it is in the repository.
const deployNamespace = "cf-workloads"

var _ = Describe("Deploying with the manifests", Ordered, func() {
	var (
		dir            string
		ca             *pki.CA
		serverPair     pki.Pair
		clientTLS      *http.Client
		configFile     string
		serviceAccount string // a folder with the service account's token and the cluster's CA
	)

	BeforeAll(func() {
		ctx := context.Background()
		DeferCleanup(func() {
			_ = kube.CoreV1().Namespaces().Delete(context.Background(), deployNamespace, metav1.DeleteOptions{})
		})
		DeferCleanup(deleteAgentObjects)
		// The cf overlay with the ssh-proxy component, as an operator adds it to theirs (whose
		// images entry then names the proxy's image too).
		kubectl("apply", "--server-side", "-k", overlayWith("overlays/cf", "ssh-proxy",
			"images:\n- name: opi\n  newName: opi-bridge/opi\n  newTag: latest\n"))

		// The Secrets the overlay mounts, as an operator creates them (docs/operating.md: "TLS, step by step").
		dir = GinkgoT().TempDir()
		var err error
		ca, err = pki.NewCA("opi-deploy-test")
		Expect(err).NotTo(HaveOccurred())
		serverPair, err = ca.Server("opi", "opi.cf-workloads.svc")
		Expect(err).NotTo(HaveOccurred())
		ccClient, err := ca.Client("opi-to-cc")
		Expect(err).NotTo(HaveOccurred())
		for name, pair := range map[string]pki.Pair{"opi-tls": serverPair, "opi-cc": ccClient} {
			_, err := kube.CoreV1().Secrets(deployNamespace).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				Data:       map[string][]byte{"tls.crt": pair.CertPEM, "tls.key": pair.KeyPEM, "ca.crt": ca.CertPEM},
			}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}

		// CC's side of the mutual TLS.
		cc, err := ca.Client("cloud-controller")
		Expect(err).NotTo(HaveOccurred())
		cert, err := tls.X509KeyPair(cc.CertPEM, cc.KeyPEM)
		Expect(err).NotTo(HaveOccurred())
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca.CertPEM)
		clientTLS = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}},
		}}

		// The config file as the pods see it: the ConfigMap's opi.yml.
		out := kubectl("-n", deployNamespace, "get", "deployment", "opi", "-o", "jsonpath={.spec.template.spec.volumes[?(@.name=='config')].configMap.name}")
		cm, err := kube.CoreV1().ConfigMaps(deployNamespace).Get(ctx, out, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		configFile = writeFile(dir, "opi.yml", []byte(cm.Data["opi.yml"]))

		// What the kubelet mounts at /var/run/secrets/kubernetes.io/serviceaccount.
		serviceAccount = filepath.Join(dir, "serviceaccount")
		Expect(os.Mkdir(serviceAccount, 0o700)).To(Succeed())
		expiry := int64(3600)
		token, err := kube.CoreV1().ServiceAccounts(deployNamespace).CreateToken(ctx, "opi",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		writeFile(serviceAccount, "token", []byte(token.Status.Token))
		writeFile(serviceAccount, "ca.crt", cluster.RestConfig().CAData)
		writeFile(serviceAccount, "namespace", []byte(deployNamespace))
	})

	It("creates the objects of the base and the overlay", func() {
		ctx := context.Background()
		_, err := kube.CoreV1().Namespaces().Get(ctx, deployNamespace, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.CoreV1().ServiceAccounts(deployNamespace).Get(ctx, "opi", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())

		// The Role is deploy/rbac.yaml's, rule for rule.
		role, err := kube.RbacV1().Roles(deployNamespace).Get(ctx, "opi", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(role.Rules).To(Equal(rbacRules()))
		// Leases: only opi's own may be read or renewed; create (which cannot name one) is alone.
		for _, rule := range role.Rules {
			if slices.Contains(rule.Resources, "leases") {
				if slices.Equal(rule.Verbs, []string{"create"}) {
					Expect(rule.ResourceNames).To(BeEmpty())
				} else {
					Expect(rule.ResourceNames).To(Equal([]string{"opi-leader"}), "lease rule %v", rule.Verbs)
				}
			}
		}
		binding, err := kube.RbacV1().RoleBindings(deployNamespace).Get(ctx, "opi", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(binding.RoleRef.Name).To(Equal("opi"))
		Expect(binding.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: "opi", Namespace: deployNamespace}))

		d, err := kube.AppsV1().Deployments(deployNamespace).Get(ctx, "opi", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(*d.Spec.Replicas).To(BeEquivalentTo(2))
		pod := d.Spec.Template.Spec
		Expect(pod.ServiceAccountName).To(Equal("opi"))
		Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
		Expect(pod.Containers).To(HaveLen(1))
		c := pod.Containers[0]
		Expect(c.Image).To(Equal("opi-bridge/opi:latest"))
		Expect(c.Args).To(Equal([]string{"--config", "/etc/opi/opi.yml"}))
		Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
		Expect(c.LivenessProbe.HTTPGet.Port).To(Equal(intstr.FromString("ops")))
		Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
		Expect(c.ReadinessProbe.HTTPGet.Port).To(Equal(intstr.FromString("ops")))
		Expect(c.Resources.Requests).To(HaveKey(corev1.ResourceMemory))
		Expect(c.Resources.Limits).To(HaveKey(corev1.ResourceMemory))
		Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
		Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
		Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
		var secrets []string
		for _, v := range pod.Volumes {
			if v.Secret != nil {
				secrets = append(secrets, v.Secret.SecretName)
			}
		}
		Expect(secrets).To(ConsistOf("opi-tls", "opi-cc"))

		pdb, err := kube.PolicyV1().PodDisruptionBudgets(deployNamespace).Get(ctx, "opi", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(pdb.Spec.MinAvailable.IntValue()).To(Equal(1))
		Expect(pdb.Spec.Selector.MatchLabels).To(Equal(d.Spec.Selector.MatchLabels))

		svc, err := kube.CoreV1().Services(deployNamespace).Get(ctx, "opi", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(svc.Spec.Selector).To(Equal(d.Spec.Selector.MatchLabels))
		servicePorts := func(svc *corev1.Service) []string {
			var ports []string
			for _, p := range svc.Spec.Ports {
				ports = append(ports, p.Name+"="+p.TargetPort.String())
			}
			return ports
		}
		// The Service exposed to CC carries the API only; the ops port has its own, in-cluster one.
		Expect(servicePorts(svc)).To(ConsistOf("api=api"))
		opsSvc, err := kube.CoreV1().Services(deployNamespace).Get(ctx, "opi-ops", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(opsSvc.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
		Expect(opsSvc.Spec.Selector).To(Equal(d.Spec.Selector.MatchLabels))
		Expect(servicePorts(opsSvc)).To(ConsistOf("ops=ops"))

		Expect(os.ReadFile(configFile)).To(ContainSubstring("internal_url:"))
	})

	// startInCluster runs opi as its pod would: the ConfigMap's config file, in-cluster
	// configuration from a service-account folder and KUBERNETES_SERVICE_*, and so with only
	// the Role's rights. Listen addresses and file paths are the pod's, moved to loopback and
	// to the test's folder by flags.
	startInCluster := func(extra ...string) (*opiServer, string) {
		apiServer, err := url.Parse(cluster.Server())
		Expect(err).NotTo(HaveOccurred())
		host, port, err := net.SplitHostPort(apiServer.Host)
		Expect(err).NotTo(HaveOccurred())
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "KUBECONFIG=") {
				env = append(env, kv)
			}
		}
		env = append(env, "KUBERNETES_SERVICE_HOST="+host, "KUBERNETES_SERVICE_PORT="+port, "OPI_SERVICEACCOUNT_DIR="+serviceAccount)

		tlsDir := GinkgoT().TempDir()
		certFile, keyFile, err := serverPair.Write(tlsDir, "server")
		Expect(err).NotTo(HaveOccurred())
		caFile, err := ca.WriteCert(tlsDir, "ca")
		Expect(err).NotTo(HaveOccurred())
		addr, opsAddr := freeAddr(), freeAddr()
		o := &opiServer{
			URL: "https://" + addr, Namespace: deployNamespace, client: clientTLS, env: env,
			args: append([]string{"connect", "--config", configFile, "--listen", addr, "--ops-listen", opsAddr,
				"--tls-cert", certFile, "--tls-key", keyFile, "--tls-client-ca", caFile,
				"--cc-client-cert", certFile, "--cc-client-key", keyFile, "--cc-ca", caFile,
				"--leader-lease-duration", "4s", "--leader-renew-deadline", "3s", "--leader-retry-period", "1s",
				"--backend", testBackend}, extra...),
		}
		o.start()
		return o, "http://" + opsAddr
	}

	It("runs a DaemonSet of opi's image in a namespace of its own, whose Pod Security level allows its host paths", func() {
		ctx := context.Background()
		ns, err := kube.CoreV1().Namespaces().Get(ctx, agentNamespace, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "privileged"))
		apps, err := kube.CoreV1().Namespaces().Get(ctx, deployNamespace, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(apps.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "baseline"), "the apps' namespace keeps its level")

		ds, err := kube.AppsV1().DaemonSets(agentNamespace).Get(ctx, agentName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		pod := ds.Spec.Template.Spec
		Expect(pod.ServiceAccountName).To(Equal(agentName))
		Expect(pod.Containers).To(HaveLen(1))
		c := pod.Containers[0]
		Expect(c.Image).To(Equal("opi-bridge/opi:latest"), "opi's image")
		Expect(c.Command).To(Equal([]string{"/opi-agent"}))
		Expect(c.Args).To(ContainElements("--node=$(NODE_NAME)", "--namespace="+deployNamespace, "--pod-logs=/var/log/pods", "--state-dir=/var/lib/opi-agent"))
		env := map[string]string{}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				env[e.Name] = e.ValueFrom.FieldRef.FieldPath
			}
		}
		Expect(env).To(HaveKeyWithValue("NODE_NAME", "spec.nodeName"))
		Expect(env).To(HaveKeyWithValue("NODE_IP", "status.hostIP"))
		Expect(c.Resources.Requests).To(HaveKey(corev1.ResourceMemory))
		Expect(c.Resources.Limits).To(HaveKey(corev1.ResourceMemory))
		Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
		Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
		Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
		Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
		Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))

		mounts := map[string]corev1.VolumeMount{}
		for _, m := range c.VolumeMounts {
			mounts[m.MountPath] = m
		}
		Expect(mounts).To(HaveKey("/var/log/pods"))
		Expect(mounts["/var/log/pods"].ReadOnly).To(BeTrue(), "the pod log folder is read only")
		Expect(mounts).To(HaveKey("/var/lib/opi-agent"))
		Expect(mounts["/var/lib/opi-agent"].ReadOnly).To(BeFalse(), "the state folder is the agent's to write")
		hostPaths := map[string]string{}
		var secrets []string
		for _, v := range pod.Volumes {
			if v.HostPath != nil {
				hostPaths[v.Name] = v.HostPath.Path
			}
			if v.Secret != nil {
				secrets = append(secrets, v.Secret.SecretName)
			}
		}
		Expect(hostPaths).To(Equal(map[string]string{
			mounts["/var/log/pods"].Name: "/var/log/pods", mounts["/var/lib/opi-agent"].Name: "/var/lib/opi-agent",
		}))
		Expect(secrets).To(ConsistOf("opi-agent-loggregator"))

		// The apps' namespace would refuse the agent's pod (baseline forbids host paths); its
		// own admits them (the DaemonSet's pods below exist).
		inApps := *pod.DeepCopy()
		inApps.ServiceAccountName = "opi" // one that exists there
		_, err = kube.CoreV1().Pods(deployNamespace).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "agent-psa-check-"}, Spec: inApps,
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		Expect(err).To(MatchError(And(ContainSubstring("violates PodSecurity"), ContainSubstring("hostPath"))))

		// One pod per node: the DaemonSet controller creates them and the scheduler binds them
		// (kwok runs no container).
		nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(nodes.Items).NotTo(BeEmpty())
		Eventually(func() []int32 {
			ds, err := kube.AppsV1().DaemonSets(agentNamespace).Get(ctx, agentName, metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return []int32{ds.Status.DesiredNumberScheduled, ds.Status.CurrentNumberScheduled}
		}, 60*time.Second).Should(Equal([]int32{int32(len(nodes.Items)), int32(len(nodes.Items))}))
	})

	It("grants the agent list and watch in the apps' namespace and one cluster rule, get on nodes/stats", func() {
		ctx := context.Background()
		role, err := kube.RbacV1().Roles(deployNamespace).Get(ctx, agentName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(role.Rules).To(ConsistOf(
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets"}, Verbs: []string{"list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"list", "watch"}},
		))
		cr, err := kube.RbacV1().ClusterRoles().Get(ctx, "opi-agent-node-stats", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(cr.Rules).To(Equal([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/stats"}, Verbs: []string{"get"}}}))
		crb, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, "opi-agent-node-stats", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(crb.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: agentName, Namespace: agentNamespace}))

		// What the API server's authorizer answers for the agent's ServiceAccount.
		// (TYPE/NAME is a name to can-i: a subresource is its own flag.)
		Expect(canI("get", "nodes", "--subresource=stats")).To(Equal("yes"))
		for _, verb := range []string{"list", "watch"} {
			for _, resource := range []string{"pods", "deployments.apps", "statefulsets.apps", "jobs.batch"} {
				Expect(canI(verb, resource, "-n", deployNamespace)).To(Equal("yes"), "%s %s", verb, resource)
			}
		}
		for _, no := range [][]string{
			{"get", "secrets", "-n", deployNamespace},
			{"list", "secrets", "-n", deployNamespace},
			{"get", "pods", "-n", deployNamespace},
			{"delete", "pods", "-n", deployNamespace},
			{"list", "pods", "-n", "kube-system"},
			{"get", "nodes", "--subresource=proxy"},
			{"get", "nodes", "--subresource=log"},
			{"get", "nodes"},
			{"list", "secrets", "-n", agentNamespace},
		} {
			Expect(canI(no...)).To(Equal("no"), "%v", no)
		}
	})

	It("runs the ssh-proxy component: opi's image as opi ssh-proxy, a Service on 2222, its own ServiceAccount and Role", func() {
		ctx := context.Background()
		d, err := kube.AppsV1().Deployments(deployNamespace).Get(ctx, sshProxyName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		pod := d.Spec.Template.Spec
		Expect(pod.ServiceAccountName).To(Equal(sshProxyName))
		Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
		Expect(pod.Containers).To(HaveLen(1))
		c := pod.Containers[0]
		Expect(c.Image).To(Equal("opi-bridge/opi:latest"), "opi's image, as the overlay sets it")
		Expect(c.Command).To(Equal([]string{"/opi", "ssh-proxy"}))
		Expect(c.Args).To(Equal([]string{"--config", "/etc/opi-ssh-proxy/ssh-proxy.yml"}))
		Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
		Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
		Expect(*c.SecurityContext.AllowPrivilegeEscalation).To(BeFalse())
		Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
		var secrets []string
		for _, v := range pod.Volumes {
			if v.Secret != nil {
				secrets = append(secrets, v.Secret.SecretName)
			}
		}
		Expect(secrets).To(ConsistOf(sshProxyName), "the host key and the UAA client's secret")

		svc, err := kube.CoreV1().Services(deployNamespace).Get(ctx, sshProxyName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(svc.Spec.Selector).To(Equal(d.Spec.Selector.MatchLabels))
		Expect(svc.Spec.Ports).To(HaveLen(1))
		Expect(svc.Spec.Ports[0].Port).To(BeEquivalentTo(2222))
		Expect(svc.Spec.Ports[0].TargetPort).To(Equal(intstr.FromString("ssh")))
		_, err = kube.CoreV1().ServiceAccounts(deployNamespace).Get(ctx, sshProxyName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		cm, err := kube.CoreV1().ConfigMaps(deployNamespace).Get(ctx,
			kubectl("-n", deployNamespace, "get", "deployment", sshProxyName, "-o", "jsonpath={.spec.template.spec.volumes[?(@.name=='config')].configMap.name}"),
			metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(cm.Data["ssh-proxy.yml"]).To(ContainSubstring("uaa_client_secret_file:"))

		// The Role is the component's rbac.yaml, rule for rule.
		role, err := kube.RbacV1().Roles(deployNamespace).Get(ctx, sshProxyName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(role.Rules).To(Equal(roleRulesIn("../deploy/kustomize/components/ssh-proxy/rbac.yaml")))
		binding, err := kube.RbacV1().RoleBindings(deployNamespace).Get(ctx, sshProxyName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(binding.RoleRef.Name).To(Equal(sshProxyName))
		Expect(binding.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: sshProxyName, Namespace: deployNamespace}))
	})

	It("lets the proxy's ServiceAccount read the instances and enter them, and nothing more; opi's own may not enter them", func() {
		proxyCan := func(args ...string) string {
			return canIAs(deployNamespace, sshProxyName, append(args, "-n", deployNamespace)...)
		}
		for _, verb := range []string{"get", "list", "watch"} {
			for _, resource := range []string{"pods", "deployments.apps", "statefulsets.apps"} {
				Expect(proxyCan(verb, resource)).To(Equal("yes"), "%s %s", verb, resource)
			}
		}
		for _, yes := range [][]string{
			{"list", "jobs.batch"}, {"watch", "jobs.batch"},
			{"create", "pods", "--subresource=exec"}, {"get", "pods", "--subresource=exec"},
			{"create", "pods", "--subresource=portforward"},
			{"patch", "pods", "--subresource=ephemeralcontainers"},
		} {
			Expect(proxyCan(yes...)).To(Equal("yes"), "%v", yes)
		}
		for _, no := range [][]string{
			{"create", "pods"}, {"delete", "pods"}, {"patch", "pods"}, {"update", "pods"},
			{"get", "pods", "--subresource=portforward"}, {"get", "pods", "--subresource=attach"},
			{"update", "pods", "--subresource=ephemeralcontainers"},
			{"get", "pods", "--subresource=log"},
			{"get", "secrets"}, {"list", "secrets"}, {"get", "configmaps"},
			{"create", "deployments.apps"}, {"patch", "deployments.apps"}, {"delete", "statefulsets.apps"},
			{"get", "jobs.batch"}, {"create", "jobs.batch"},
			{"create", "serviceaccounts", "--subresource=token"},
		} {
			Expect(proxyCan(no...)).To(Equal("no"), "%v", no)
		}
		Expect(canIAs(deployNamespace, sshProxyName, "list", "pods", "-n", "kube-system")).To(Equal("no"))
		Expect(canIAs(deployNamespace, sshProxyName, "list", "pods", "--all-namespaces")).To(Equal("no"))

		// Exec lives only in the proxy's Role: opi's has none of its rights into a pod.
		for _, rule := range rbacRules() {
			Expect(rule.Resources).NotTo(ContainElement(BeElementOf("pods/exec", "pods/portforward", "pods/ephemeralcontainers", "pods/attach", "pods/*", "*")))
		}
		for _, no := range [][]string{
			{"create", "pods", "--subresource=exec"}, {"get", "pods", "--subresource=exec"},
			{"create", "pods", "--subresource=portforward"}, {"create", "pods", "--subresource=attach"},
			{"patch", "pods", "--subresource=ephemeralcontainers"}, {"update", "pods", "--subresource=ephemeralcontainers"},
		} {
			Expect(canIAs(deployNamespace, "opi", append(no, "-n", deployNamespace)...)).To(Equal("no"), "opi: %v", no)
		}
	})

	It("runs opi agent with the in-cluster configuration and only its own rights: its caches sync, nothing is forbidden", func() {
		ctx := context.Background()
		apiServer, err := url.Parse(cluster.Server())
		Expect(err).NotTo(HaveOccurred())
		host, port, err := net.SplitHostPort(apiServer.Host)
		Expect(err).NotTo(HaveOccurred())
		// What the kubelet mounts in the agent's pod.
		sa := GinkgoT().TempDir()
		expiry := int64(3600)
		token, err := kube.CoreV1().ServiceAccounts(agentNamespace).CreateToken(ctx, agentName,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		writeFile(sa, "token", []byte(token.Status.Token))
		writeFile(sa, "ca.crt", cluster.RestConfig().CAData)
		nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(nodes.Items).NotTo(BeEmpty())

		ingress, err := standin.Start(GinkgoT().TempDir())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(ingress.Stop)
		files := ingress.ClientFiles()
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "NODE_IP=") && !strings.HasPrefix(kv, "NODE_NAME=") {
				env = append(env, kv)
			}
		}
		env = append(env, "KUBERNETES_SERVICE_HOST="+host, "KUBERNETES_SERVICE_PORT="+port, "OPI_SERVICEACCOUNT_DIR="+sa,
			"NODE_NAME="+nodes.Items[0].Name)
		ops := freeAddr()
		cmd := exec.Command(opiBin, "agent", "--namespace", deployNamespace, "--backend", testBackend,
			"--pod-logs", GinkgoT().TempDir(), "--state-dir", GinkgoT().TempDir(),
			"--loggregator-addr", ingress.Addr(), "--loggregator-server-name", standin.ServerName,
			"--loggregator-ca", files.CA, "--loggregator-cert", files.Cert, "--loggregator-key", files.Key,
			"--ops-listen", ops)
		cmd.Env = env
		session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { session.Terminate().Wait(20 * time.Second) })

		ready := func() int {
			resp, err := http.Get("http://" + ops + "/readyz")
			if err != nil {
				return 0
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		Eventually(ready, 60*time.Second).Should(Equal(http.StatusOK))
		resp, err := http.Get("http://" + ops + "/metrics")
		Expect(err).NotTo(HaveOccurred())
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		Expect(string(body)).To(ContainSubstring("opi_agent_ready 1"))
		// The agent's own log (stdout) and client-go's (the reflectors' errors, stderr).
		Expect(string(session.Out.Contents()) + string(session.Err.Contents())).NotTo(ContainSubstring("forbidden"))
	})

	It("gives the agent's pods a NetworkPolicy: out to DNS, the API server, Loggregator and the kubelet; in to the ops port from the metrics scraper's namespace only", func() {
		np, err := kube.NetworkingV1().NetworkPolicies(agentNamespace).Get(context.Background(), agentName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(np.Spec.PodSelector.MatchLabels).To(Equal(map[string]string{"app.kubernetes.io/name": agentName}))
		var egress, ingress []string
		for _, r := range np.Spec.Egress {
			for _, p := range r.Ports {
				egress = append(egress, fmt.Sprintf("%s/%s", *p.Protocol, p.Port.String()))
			}
		}
		for _, r := range np.Spec.Ingress {
			for _, p := range r.Ports {
				ingress = append(ingress, fmt.Sprintf("%s/%s", *p.Protocol, p.Port.String()))
			}
		}
		Expect(egress).To(ConsistOf("UDP/53", "TCP/53", "TCP/443", "TCP/6443", "TCP/8082", "TCP/10250"))
		Expect(ingress).To(ConsistOf("TCP/8090"))
		// One peer: the scraper's namespace (the kubelet's probes come from the node, which no
		// NetworkPolicy restricts).
		Expect(np.Spec.Ingress).To(HaveLen(1))
		Expect(np.Spec.Ingress[0].From).To(Equal([]networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}}}}))
	})
	It("gives opi's own pods a NetworkPolicy: out to DNS, the API server, CC and registries; in to the api and ops ports", func() {
		np, err := kube.NetworkingV1().NetworkPolicies(deployNamespace).Get(context.Background(), "opi", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(np.Spec.PodSelector.MatchLabels).To(Equal(map[string]string{"app.kubernetes.io/name": "opi"}))
		Expect(np.Spec.PolicyTypes).To(ConsistOf(networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress))
		portsOf := func(rules []networkingv1.NetworkPolicyPort) []string {
			var out []string
			for _, p := range rules {
				out = append(out, fmt.Sprintf("%s/%s", *p.Protocol, p.Port.String()))
			}
			return out
		}
		var egress, ingress []string
		for _, r := range np.Spec.Egress {
			egress = append(egress, portsOf(r.Ports)...)
		}
		for _, r := range np.Spec.Ingress {
			ingress = append(ingress, portsOf(r.Ports)...)
		}
		Expect(egress).To(ConsistOf("UDP/53", "TCP/53", "TCP/443", "TCP/6443", "TCP/9023", "TCP/5000"))
		Expect(ingress).To(ConsistOf("TCP/8085", "TCP/8086"))
	})

	It("runs opi with the in-cluster configuration and only the Role's rights", func() {
		o, ops := startInCluster()
		DeferCleanup(o.stop)

		// Probes and Prometheus need no client certificate on the ops listener...
		for _, path := range []string{"/healthz", "/readyz", "/metrics", "/openapi.json"} {
			resp, err := http.Get(ops + path)
			Expect(err).NotTo(HaveOccurred())
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusOK), path)
			if path == "/metrics" {
				Expect(string(body)).To(ContainSubstring("opi_"))
			}
		}
		// ...while the API demands one.
		_, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}).Get(o.URL + "/apps")
		Expect(err).To(HaveOccurred())

		a := newApp()
		desire(o, a)
		Expect(workloads(deployNamespace, a)).To(HaveLen(1))
		status, body := o.call("GET", "/apps", "")
		Expect(status).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring(a.processGUID()))
		status, _ = o.call("PUT", a.path()+"/stop", "")
		Expect(status).To(Equal(http.StatusOK))

		Expect(o.Logs()).NotTo(ContainSubstring("forbidden"))
	})

	It("with two replicas: both serve, one holds the Lease and does the background work, and the other takes over when it dies", func() {
		ctx := context.Background()
		first, _ := startInCluster("--janitor-period", "1s")
		DeferCleanup(first.stop)
		Eventually(first.session.Out).Should(gbytes.Say(`leader-election.leading"`))
		second, _ := startInCluster("--janitor-period", "1s")
		DeferCleanup(second.stop)

		// Both serve, and a write on one is seen by the other once its watch delivers it.
		a := newApp()
		desire(first, a)
		Eventually(func() string { _, body := second.call("GET", "/apps", ""); return body }).Should(ContainSubstring(a.processGUID()))

		holder := func() string {
			lease, err := kube.CoordinationV1().Leases(deployNamespace).Get(ctx, "opi-leader", metav1.GetOptions{})
			if err != nil || lease.Spec.HolderIdentity == nil {
				return ""
			}
			return *lease.Spec.HolderIdentity
		}
		leader := holder()
		Expect(leader).NotTo(BeEmpty())
		Expect(first.Logs()).To(ContainSubstring(leader))
		Eventually(first.Logs).Should(ContainSubstring("janitor.started"))
		Eventually(second.Logs).Should(ContainSubstring(`leader-election.following"`))
		Expect(second.Logs()).NotTo(ContainSubstring(`leader-election.leading"`))
		Expect(second.Logs()).NotTo(ContainSubstring("janitor.started"))

		// The leader dies without giving up the Lease: the other takes it once it expires, and
		// with it the janitor.
		first.kill()
		first.session = nil // nothing left to stop
		Eventually(holder, 30*time.Second).ShouldNot(Or(Equal(leader), BeEmpty()))
		Expect(second.Logs()).To(ContainSubstring(holder()))
		Eventually(second.Logs, 30*time.Second).Should(ContainSubstring("janitor.started"))

		status, body := second.call("GET", a.path(), "")
		Expect(status).To(Equal(http.StatusOK), body)
	})
})

// The node agent's namespace and names (deploy/kustomize/components/agent, which the cf overlay
// includes).
const agentNamespace, agentName = "opi-agent", "opi-agent"

// sshProxyName names the ssh-proxy component's Deployment, Service, ServiceAccount and Role.
const sshProxyName = "opi-ssh-proxy"

// deleteAgentObjects deletes what the agent's component created outside opi's namespace.
func deleteAgentObjects() {
	ctx := context.Background()
	_ = kube.CoreV1().Namespaces().Delete(ctx, agentNamespace, metav1.DeleteOptions{})
	_ = kube.RbacV1().ClusterRoleBindings().Delete(ctx, "opi-agent-node-stats", metav1.DeleteOptions{})
	_ = kube.RbacV1().ClusterRoles().Delete(ctx, "opi-agent-node-stats", metav1.DeleteOptions{})
}

// canI is `kubectl auth can-i <args>` as the agent's ServiceAccount: "yes" or "no".
func canI(args ...string) string { return canIAs(agentNamespace, agentName, args...) }

// canIAs is kubectl auth can-i's answer for the ServiceAccount namespace/name.
func canIAs(namespace, name string, args ...string) string {
	cmd := exec.Command(filepath.Join(cluster.BinDir(), "kubectl"), append([]string{"--kubeconfig", cluster.Kubeconfig(),
		"auth", "can-i", "--as", "system:serviceaccount:" + namespace + ":" + name}, args...)...)
	out, _ := cmd.Output() // exit status 1 is the answer no
	return strings.TrimSpace(string(out))
}

// rbacRules are the Role's rules in deploy/rbac.yaml.
func rbacRules() []rbacv1.PolicyRule { return roleRulesIn("../deploy/rbac.yaml") }

// roleRulesIn are the rules of the Role in the manifest at path.
func roleRulesIn(path string) []rbacv1.PolicyRule {
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var role rbacv1.Role
		Expect(yaml.Unmarshal([]byte(doc), &role)).To(Succeed())
		if role.Kind == "Role" {
			return role.Rules
		}
	}
	Fail(path + " holds no Role")
	return nil
}
