package bifrost

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/netip"
	"strings"

	"github.com/opi-bridge/opi/opi"
)

// egressRuleJSON is one application security group rule as CC sends it. CC has sent both
// Diego's snake_case keys and camelCase ones; both are read (snake_case wins when a rule has
// both).
type egressRuleJSON struct {
	Protocol     string          `json:"protocol"`
	Destinations []string        `json:"destinations"`
	Ports        []int64         `json:"ports"`
	PortRange    *portRangeJSON  `json:"port_range"`
	PortRangeCC  *portRangeJSON  `json:"portRange"`
	ICMPInfo     *icmpInfoJSON   `json:"icmp_info"`
	ICMPInfoCC   *icmpInfoJSON   `json:"icmpInfo"`
	Log          json.RawMessage `json:"log"`
}

type portRangeJSON struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

type icmpInfoJSON struct {
	Type int32 `json:"type"`
	Code int32 `json:"code"`
}

// ConvertEgressRules reads CC's egress_rules (of an LRP, or the operator's
// kubernetes.task_default_egress_rules): protocol tcp, udp, icmp or all; destinations as
// CIDRs, single addresses or "first-last" ranges (several may be joined by commas) (turned into the CIDRs that cover exactly the
// range); ports as a list and/or a port_range. Anything else is a 400 naming the rule.
func ConvertEgressRules(raw []json.RawMessage) ([]opi.EgressRule, error) {
	out := make([]opi.EgressRule, 0, len(raw))
	for i, r := range raw {
		field := fmt.Sprintf("egress_rules[%d]", i)
		var rule egressRuleJSON
		if err := json.Unmarshal(r, &rule); err != nil {
			return nil, invalid(field, "must be a security group rule object {protocol, destinations, ports, port_range}")
		}
		converted := opi.EgressRule{Protocol: strings.ToLower(rule.Protocol), ICMPType: -1, ICMPCode: -1}
		switch converted.Protocol {
		case opi.ProtocolTCP, opi.ProtocolUDP, opi.ProtocolICMP, opi.ProtocolAll:
		default:
			return nil, invalid(field+".protocol", "%q is not one of tcp, udp, icmp, all", rule.Protocol)
		}
		if len(rule.Destinations) == 0 {
			return nil, invalid(field+".destinations", "is required")
		}
		for j, list := range rule.Destinations {
			// CC may join several destinations with commas (its comma-delimited ASG feature).
			for _, d := range strings.Split(list, ",") {
				cidrs, err := destinationCIDRs(d)
				if err != nil {
					return nil, invalid(fmt.Sprintf("%s.destinations[%d]", field, j), "%q %s", d, err.Error())
				}
				converted.Destinations = append(converted.Destinations, cidrs...)
			}
		}
		portRange := rule.PortRange
		if portRange == nil {
			portRange = rule.PortRangeCC
		}
		hasPorts := len(rule.Ports) > 0 || portRange != nil
		if hasPorts && converted.Protocol != opi.ProtocolTCP && converted.Protocol != opi.ProtocolUDP {
			return nil, invalid(field, "has ports, which only tcp and udp rules may have")
		}
		for j, p := range rule.Ports {
			if err := checkBounds(bound{field: fmt.Sprintf("%s.ports[%d]", field, j), value: p, lowest: 1, highest: MaxPort}); err != nil {
				return nil, err
			}
			converted.Ports = append(converted.Ports, opi.PortRange{Start: int32(p), End: int32(p)})
		}
		if portRange != nil {
			if portRange.Start < 1 || portRange.End > MaxPort || portRange.Start > portRange.End {
				return nil, invalid(field+".port_range", "must satisfy 1 <= start <= end <= %d, got %d..%d", MaxPort, portRange.Start, portRange.End)
			}
			converted.Ports = append(converted.Ports, opi.PortRange{Start: int32(portRange.Start), End: int32(portRange.End)})
		}
		icmp := rule.ICMPInfo
		if icmp == nil {
			icmp = rule.ICMPInfoCC
		}
		if icmp != nil {
			if converted.Protocol != opi.ProtocolICMP {
				return nil, invalid(field, "has icmp_info, which only icmp rules may have")
			}
			converted.ICMPType, converted.ICMPCode = icmp.Type, icmp.Code
		}
		out = append(out, converted)
	}
	return out, nil
}

// destinationCIDRs turns one destination (CIDR, address, or "first-last" range) into CIDRs.
func destinationCIDRs(d string) ([]string, error) {
	d = strings.TrimSpace(d)
	if first, last, isRange := strings.Cut(d, "-"); isRange {
		from, err1 := netip.ParseAddr(strings.TrimSpace(first))
		to, err2 := netip.ParseAddr(strings.TrimSpace(last))
		if err1 != nil || err2 != nil || from.Is4() != to.Is4() || to.Less(from) {
			return nil, fmt.Errorf("is not a range of two addresses of one family, lowest first")
		}
		return rangeCIDRs(from.Unmap(), to.Unmap()), nil
	}
	if strings.Contains(d, "/") {
		prefix, err := netip.ParsePrefix(d)
		if err != nil {
			return nil, fmt.Errorf("is not a CIDR")
		}
		return []string{prefix.Masked().String()}, nil
	}
	addr, err := netip.ParseAddr(d)
	if err != nil {
		return nil, fmt.Errorf("is not an address, a CIDR or a range")
	}
	return []string{netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen()).String()}, nil
}

// rangeCIDRs is the shortest list of CIDRs covering exactly from..to: repeatedly the largest
// block that starts at from and does not pass to.
func rangeCIDRs(from, to netip.Addr) []string {
	bits := from.BitLen()
	start := new(big.Int).SetBytes(from.AsSlice())
	end := new(big.Int).SetBytes(to.AsSlice())
	one := big.NewInt(1)
	var out []string
	for start.Cmp(end) <= 0 {
		// The block size is limited by the alignment of start and by what is left.
		size := 0
		for size < bits {
			block := new(big.Int).Lsh(one, uint(size+1))
			if new(big.Int).Mod(start, block).Sign() != 0 {
				break
			}
			last := new(big.Int).Add(start, new(big.Int).Sub(block, one))
			if last.Cmp(end) > 0 {
				break
			}
			size++
		}
		b := make([]byte, bits/8)
		start.FillBytes(b)
		addr, _ := netip.AddrFromSlice(b) // b has 4 or 16 bytes
		out = append(out, netip.PrefixFrom(addr, bits-size).String())
		start.Add(start, new(big.Int).Lsh(one, uint(size)))
	}
	return out
}
