package objects

import (
	"encoding/json"

	"github.com/opi-bridge/opi/opi"
)

// egressRuleJSON is one rule in names.AnnotationEgressRules.
type egressRuleJSON struct {
	Protocol     string          `json:"protocol"`
	Destinations []string        `json:"destinations"`
	Ports        []opi.PortRange `json:"ports,omitempty"`
	ICMPType     int32           `json:"icmp_type"`
	ICMPCode     int32           `json:"icmp_code"`
}

// EgressAnnotation is the value of names.AnnotationEgressRules: JSON of the rules.
func EgressAnnotation(rules []opi.EgressRule) string {
	out := make([]egressRuleJSON, 0, len(rules))
	for _, r := range rules {
		out = append(out, egressRuleJSON{Protocol: r.Protocol, Destinations: r.Destinations, Ports: r.Ports, ICMPType: r.ICMPType, ICMPCode: r.ICMPCode})
	}
	b, _ := json.Marshal(out) // strings and ints always marshal
	return string(b)
}

// ParseEgressAnnotation reads names.AnnotationEgressRules back (nil when absent or unreadable).
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
