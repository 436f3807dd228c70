package main

import (
	"context"
	"fmt"
	"github.com/opi-bridge/opi/k8s"
	"time"

	"code.cloudfoundry.org/lager/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
)

// gatewayClient is the Gateway API client the backend is handed: always in routing mode gateway
// (whose hook checks at start that the cluster serves HTTPRoutes), and in the other modes
// whenever the cluster serves HTTPRoutes, so that the janitor removes the HTTPRoutes of opi's
// LRPs a foundation switched from gateway mode keeps (the janitor's Gateway client). nil, and nothing
// logged as an error, when the cluster does not serve them: nothing is listed.
func gatewayClient(ctx context.Context, mode string, disc discovery.DiscoveryInterfaceWithContext, restConfig *rest.Config, logger lager.Logger) (gateway.Interface, error) {
	if mode != k8s.RoutingGateway {
		served, err := servesHTTPRoutes(ctx, disc)
		if err != nil {
			logger.Info("httproutes-unknown", lager.Data{"reason": err.Error(),
				"note": "HTTPRoutes a gateway mode left are not looked for until opi restarts"})
		}
		if !served {
			return nil, nil
		}
	}
	// Gateway API objects are JSON only (CRDs): this client keeps the default content type.
	gwConfig := rest.CopyConfig(restConfig)
	gwConfig.ContentType, gwConfig.AcceptContentTypes = "", ""
	client, err := gateway.NewForConfig(gwConfig)
	if err != nil {
		return nil, fmt.Errorf("make gateway api client: %w", err)
	}
	return client, nil
}

// discoverHTTPRoutesTimeout bounds the one discovery request of servesHTTPRoutes at start-up.
const discoverHTTPRoutesTimeout = 10 * time.Second

// servesHTTPRoutes says whether the cluster serves the Gateway API's HTTPRoute
// (gateway.networking.k8s.io/v1): a group version it does not know is no error.
func servesHTTPRoutes(ctx context.Context, disc discovery.DiscoveryInterfaceWithContext) (bool, error) {
	resource := k8s.HTTPRoutesResource
	ctx, cancel := context.WithTimeout(ctx, discoverHTTPRoutesTimeout)
	defer cancel()
	list, err := disc.ServerResourcesForGroupVersionWithContext(ctx, resource.GroupVersion().String())
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == resource.Resource {
			return true, nil
		}
	}
	return false, nil
}
