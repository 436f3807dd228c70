// Package cluster is what opi learns of and checks in its cluster at start-up, before the
// backend is made: the namespace the apps run in and its Pod Security enforcement
// (EnsureNamespace), and the rules that depend on the cluster, such as which env names the API
// server accepts and which API groups it serves (Discover). cmd/opi calls both; the backend
// never does.
package cluster

import (
	"context"
	"strings"
	"time"

	"code.cloudfoundry.org/lager/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/opi-bridge/opi/k8s/names"
)

// probeEnvName is an env name only the relaxed rule accepts (Kubernetes 1.32 on, or with
// RelaxedEnvironmentVariableValidation on).
const probeEnvName = "opi:probe"

// discoverTimeout bounds Discover: start-up goes on without what it could not learn.
const discoverTimeout = 15 * time.Second

// Rules is what opi learns about its cluster at start-up, for the rules that depend on
// it.
type Rules struct {
	// ServerVersion is the API server's git version ("" when it did not say).
	ServerVersion string
	// RelaxedEnvNames: the API server takes any printable ASCII but '=' as an env name. False
	// (strict: [-._a-zA-Z][-._a-zA-Z0-9]*) when the probe could not tell.
	RelaxedEnvNames bool
	// EnvNamesProbed: the probe got an answer that tells (else RelaxedEnvNames is the strict
	// default).
	EnvNamesProbed bool
	// Ingress and HTTPRoute: networking.k8s.io/v1 and gateway.networking.k8s.io/v1 are served,
	// for the routing objects to come.
	Ingress, HTTPRoute bool
}

// Discover finds the cluster's rules with two cheap calls and logs what it found: the
// API groups (discovery), and a server-side dry-run create of a tiny Deployment in namespace
// whose env has a name only the relaxed rule accepts (opi's Role grants create on Deployments;
// a dry run stores nothing, and runs validation and admission as a real create would). It never
// fails: whatever it cannot learn defaults to the strict side, and says so in the log.
func Discover(ctx context.Context, client kubernetes.Interface, namespace string, logger lager.Logger) Rules {
	logger = logger.Session("discover-cluster")
	ctx, cancel := context.WithTimeout(ctx, discoverTimeout)
	defer cancel()
	var rules Rules
	if v, err := client.Discovery().ServerVersionWithContext(ctx); err != nil {
		logger.Info("server-version-unknown", lager.Data{"reason": err.Error()})
	} else {
		rules.ServerVersion = v.GitVersion
	}
	if groups, err := client.Discovery().ServerGroupsWithContext(ctx); err != nil {
		logger.Info("api-groups-unknown", lager.Data{"reason": err.Error()})
	} else {
		for _, g := range groups.Groups {
			for _, v := range g.Versions {
				switch g.Name + "/" + v.Version {
				case "networking.k8s.io/v1":
					rules.Ingress = true
				case "gateway.networking.k8s.io/v1":
					rules.HTTPRoute = true
				}
			}
		}
	}

	_, err := client.AppsV1().Deployments(namespace).Create(ctx, envProbe(namespace), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	switch {
	case err == nil:
		rules.RelaxedEnvNames, rules.EnvNamesProbed = true, true
	case apierrors.IsInvalid(err) && strings.Contains(err.Error(), ".env["):
		rules.EnvNamesProbed = true
	default:
		logger.Info("env-name-probe-failed", lager.Data{"reason": err.Error(), "assuming": "strict"})
	}
	envRule := "strict"
	if rules.RelaxedEnvNames {
		envRule = "relaxed"
	}
	logger.Info("found", lager.Data{
		"server-version": rules.ServerVersion, "env-names": envRule, "env-names-probed": rules.EnvNamesProbed,
		"ingress-v1": rules.Ingress, "gateway-httproute-v1": rules.HTTPRoute,
	})
	return rules
}

// envProbe is the smallest valid Deployment whose only questionable part is an env name.
func envProbe(namespace string) *appsv1.Deployment {
	labels := map[string]string{names.LabelManagedBy: names.ManagedByOPI, "opi-bridge.io/probe": "env-names"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "opi-env-name-probe", Namespace: namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "probe",
					Image: "probe",
					Env:   []corev1.EnvVar{{Name: probeEnvName, Value: "x"}},
				}}},
			},
		},
	}
}
