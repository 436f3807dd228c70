package gorouter

import (
	"encoding/json"
	"maps"
	"slices"
)

// Subjects of gorouter's protocol.
const (
	SubjectRegister   = "router.register"
	SubjectUnregister = "router.unregister"
	SubjectGreet      = "router.greet"
	SubjectStart      = "router.start"
)

// Registration is the body of a router.register (and of the router.unregister that removes it):
// one endpoint, host:port, for each of the URIs.
//
// Left out on purpose: tls_port and server_cert_domain_san (opi's instances serve plain HTTP on
// the route's port, as CC's cf-router routes say nothing of TLS), route_service_url (CC drops
// route services from what it sends a bridge), stale_threshold_in_seconds (it can only lower
// gorouter's prune threshold), protocol (CC's cf-router routes carry none, and gorouter's
// default is http1) and endpoint_updated_at_ns (nothing in what gorouter is known to do with it
// says what a bridge should put there).
type Registration struct {
	Host string `json:"host"`
	Port uint16 `json:"port"`
	// URIs are host.domain or host.domain/path.
	URIs []string `json:"uris"`
	// App is CC's app guid.
	App string `json:"app"`
	// PrivateInstanceID is the instance's CF_INSTANCE_GUID.
	PrivateInstanceID string `json:"private_instance_id"`
	// PrivateInstanceIndex is the instance index, a string in gorouter's protocol.
	PrivateInstanceIndex string            `json:"private_instance_index"`
	Tags                 map[string]string `json:"tags,omitempty"`
	// AvailabilityZone is left out when empty.
	AvailabilityZone string `json:"availability_zone,omitempty"`
}

// Encode is the message body.
func (r Registration) Encode() []byte {
	// A struct of strings, numbers and a string map cannot fail to encode.
	b, _ := json.Marshal(r)
	return b
}

// equal tells whether two registrations are the same message.
func (r Registration) equal(o Registration) bool {
	return r.Host == o.Host && r.Port == o.Port && slices.Equal(r.URIs, o.URIs) && r.App == o.App &&
		r.PrivateInstanceID == o.PrivateInstanceID && r.PrivateInstanceIndex == o.PrivateInstanceIndex &&
		r.AvailabilityZone == o.AvailabilityZone && maps.Equal(r.Tags, o.Tags)
}

// replaced is what must be unregistered of old before r is registered in its place: all of it
// when the endpoint moved (gorouter matches an unregister by host and port), else the URIs r
// no longer has. ok is false when nothing must be.
func (r Registration) replaced(old Registration) (Registration, bool) {
	if old.Host != r.Host || old.Port != r.Port {
		return old, true
	}
	var dropped []string
	for _, u := range old.URIs {
		if !slices.Contains(r.URIs, u) {
			dropped = append(dropped, u)
		}
	}
	if len(dropped) == 0 {
		return Registration{}, false
	}
	old.URIs = dropped
	return old, true
}
