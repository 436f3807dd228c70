package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
)

// The route objects of routing modes ingress and gateway: per (space, hostname) one Ingress or
// HTTPRoute, per (space, hostname, path) one selector-less Service, and per LRP carrying the
// route its EndpointSlices of that Service. They belong to no LRP (every LRP of the space that
// carries the route shares them), so they carry their own source type, never AppSelector's.
const (
	// SourceTypeRoute marks the route objects.
	SourceTypeRoute = "ROUTE"
	// LabelRouteKey names the (space, hostname) group an object belongs to (RouteKey).
	LabelRouteKey = "opi-bridge.io/route-key"
	// AnnotationRouteHost and AnnotationRoutePath hold the group's hostname and a Service's
	// path (the space is AnnotationSpaceGUID): the key is a digest, these say what it is of.
	AnnotationRouteHost = AnnotationPrefix + "route-host"
	AnnotationRoutePath = AnnotationPrefix + "route-path"
	// RouteServicePortName and RouteServicePort are the route Services' one port: each
	// EndpointSlice maps that name to its own LRP's port.
	RouteServicePortName = "http"
	RouteServicePort     = 8080
	// EndpointSliceManager is the EndpointSlices' endpointslice.kubernetes.io/managed-by value:
	// the control plane's controllers leave slices of another manager alone.
	EndpointSliceManager = "opi-bridge.io"
)

// RouteSelector selects the route objects.
const RouteSelector = LabelSourceType + "=" + SourceTypeRoute

// RouteKey is the label value naming the route objects of one hostname in one space: the first
// 16 hex digits of a SHA-256 over both.
func RouteKey(spaceGUID, host string) string { return digest(16, spaceGUID, host) }

// RouteObjectName is the Ingress's or HTTPRoute's name of a route key.
func RouteObjectName(key string) string { return "opi-route-" + key }

// RouteServiceName is the Service's name of one path of a route key.
func RouteServiceName(key, path string) string { return RouteObjectName(key) + "-" + digest(8, path) }

// RouteSliceName is the name of chunk n of an LRP's EndpointSlices of a route Service (family
// "" for IPv4, "v6" for IPv6).
func RouteSliceName(service, lrpKey, family string, n int) string {
	name := service + "-" + digest(8, lrpKey) + "-"
	if family != "" {
		name += family + "-"
	}
	return name + strconv.Itoa(n)
}

// digest is the first n hex digits of a SHA-256 over parts, each ended by a NUL byte.
func digest(n int, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))[:n]
}
