package localkube

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ServiceAccountKubeconfig applies manifest (YAML, with the cluster's kubectl, as an operator
// would) and returns the path of a kubeconfig, in the cluster's folder, that authenticates as the
// ServiceAccount namespace/name with a day-long token (`make run` may stay up that long): a client
// with exactly the permissions the manifest grants it.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, manifest, namespace, name string) (string, error) {
	apply := exec.CommandContext(ctx, filepath.Join(c.BinDir(), "kubectl"), "--kubeconfig", c.Kubeconfig(), "apply", "-f", "-")
	apply.Stdin = strings.NewReader(manifest)
	if out, err := apply.CombinedOutput(); err != nil {
		return "", fmt.Errorf("kubectl apply: %w: %s", err, out)
	}
	expiry := int64(24 * 3600)
	token, err := c.Clientset().CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create a token for %s/%s: %w", namespace, name, err)
	}
	admin := c.RestConfig()
	config := clientcmdapi.NewConfig()
	config.Clusters["local"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	config.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token.Status.Token}
	config.Contexts[name] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name, Namespace: namespace}
	config.CurrentContext = name
	path := filepath.Join(c.WorkDir(), "kubeconfig-"+namespace+"-"+name)
	if err := clientcmd.WriteToFile(*config, path); err != nil {
		return "", fmt.Errorf("write kubeconfig: %w", err)
	}
	return path, nil
}
