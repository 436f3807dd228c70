package spec

import (
	"encoding/json"

	"github.com/opi-bridge/opi/opi"
)

// AnnotationEgressRules is JSON of the LRP's egress rules, on its Deployment: the janitor
// rebuilds a missing egress policy from it. Rules are destinations and ports, not secrets.
const AnnotationEgressRules = AnnotationPrefix + "egress-rules"

// egressRuleJSON is one rule in AnnotationEgressRules.
type egressRuleJSON struct {
	Protocol     string          `json:"protocol"`
	Destinations []string        `json:"destinations"`
	Ports        []opi.PortRange `json:"ports,omitempty"`
	ICMPType     int32           `json:"icmp_type"`
	ICMPCode     int32           `json:"icmp_code"`
}

// EgressAnnotation is the value of AnnotationEgressRules: JSON of the rules.
func EgressAnnotation(rules []opi.EgressRule) string {
	out := make([]egressRuleJSON, 0, len(rules))
	for _, r := range rules {
		out = append(out, egressRuleJSON{Protocol: r.Protocol, Destinations: r.Destinations, Ports: r.Ports, ICMPType: r.ICMPType, ICMPCode: r.ICMPCode})
	}
	b, _ := json.Marshal(out) // strings and ints always marshal
	return string(b)
}

// ParseEgressAnnotation reads AnnotationEgressRules back (nil when absent or unreadable).
func ParseEgressAnnotation(s string) []opi.EgressRule {
	var in []egressRuleJSON
	if s == "" || json.Unmarshal([]byte(s), &in) != nil {
		return nil
	}
	out := make([]opi.EgressRule, 0, len(in))
	for _, r := range in {
		out = append(out, opi.EgressRule{Protocol: r.Protocol, Destinations: r.Destinations, Ports: r.Ports, ICMPType: r.ICMPType, ICMPCode: r.ICMPCode})
	}
	return out
}
