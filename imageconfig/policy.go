package imageconfig

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// DefaultRefusedCIDRs are the ranges a registry's address must not be in unless the operator
// allows it: loopback, link-local (the cloud metadata endpoint 169.254.169.254 among them), the
// private ranges (RFC 1918, IPv6 unique local), carrier-grade NAT, unspecified, multicast and
// broadcast. A staging would otherwise let any developer probe what opi's pods can reach.
var DefaultRefusedCIDRs = []string{
	"0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
	"100.64.0.0/10", "224.0.0.0/4", "240.0.0.0/4",
	"::/128", "::1/128", "fe80::/10", "fc00::/7", "ff00::/8",
}

// nat64 is the well-known NAT64 prefix: an address in it reaches the IPv4 address it embeds,
// which is checked as well.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// AddressPolicy decides which IP addresses a registry exchange may dial. The most specific
// range that contains an address decides (an allowed range wins over a refused range of the
// same length); an address in no range is allowed.
type AddressPolicy struct {
	rules []policyRule
}

type policyRule struct {
	prefix netip.Prefix
	allow  bool
}

// NewAddressPolicy refuses DefaultRefusedCIDRs and refused, and allows allowed (which may
// open a part of a refused range, or all of it).
func NewAddressPolicy(allowed, refused []netip.Prefix) *AddressPolicy {
	p := &AddressPolicy{}
	for _, c := range DefaultRefusedCIDRs {
		p.rules = append(p.rules, policyRule{prefix: netip.MustParsePrefix(c)})
	}
	for _, c := range refused {
		p.rules = append(p.rules, policyRule{prefix: c.Masked()})
	}
	for _, c := range allowed {
		p.rules = append(p.rules, policyRule{prefix: c.Masked(), allow: true})
	}
	sort.SliceStable(p.rules, func(i, j int) bool {
		if a, b := p.rules[i].prefix.Bits(), p.rules[j].prefix.Bits(); a != b {
			return a > b
		}
		return p.rules[i].allow && !p.rules[j].allow
	})
	return p
}

// ParseCIDRs parses ranges such as "10.0.0.0/8" or "fd00::/8"; a single address is its own /32
// or /128.
func ParseCIDRs(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "/") {
			addr, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("%q is not a CIDR or an IP address", s)
			}
			out = append(out, netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen()))
			continue
		}
		prefix, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR", s)
		}
		out = append(out, prefix)
	}
	return out, nil
}

// Allows tells whether addr may be dialled.
func (p *AddressPolicy) Allows(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !p.decide(addr) {
		return false
	}
	if addr.Is6() && nat64.Contains(addr) {
		b := addr.As16()
		return p.decide(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	return true
}

func (p *AddressPolicy) decide(addr netip.Addr) bool {
	for _, r := range p.rules {
		// An IPv4 range never contains an IPv6 address and the other way round.
		if r.prefix.Contains(addr) {
			return r.allow
		}
	}
	return true
}

// errNotAllowed is what a dial to a refused address fails with.
var errNotAllowed = errors.New("address not allowed for registries")

// check is a net.Dialer Control hook: it sees the address actually dialled (after name
// resolution, for every address tried and every hop of a redirect).
func (p *AddressPolicy) check(address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unparsable %q", errNotAllowed, address)
	}
	if !p.Allows(ap.Addr()) {
		return fmt.Errorf("%w: %s", errNotAllowed, ap.Addr())
	}
	return nil
}
