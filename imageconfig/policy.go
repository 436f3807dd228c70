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
// private ranges (RFC 1918, IPv6 unique local), carrier-grade NAT, IETF protocol assignments
// (192.0.0.0/24), benchmarking (198.18.0.0/15, often routed inside data centres), unspecified,
// multicast and broadcast. A staging would otherwise let any developer probe what opi's pods can
// reach. IPv6 addresses that embed an IPv4 address are checked on that address as well (see
// embeddedIPv4).
var DefaultRefusedCIDRs = []string{
	"0.0.0.0/8", "127.0.0.0/8", "169.254.0.0/16", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
	"100.64.0.0/10", "192.0.0.0/24", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
	"::/128", "::1/128", "fe80::/10", "fc00::/7", "ff00::/8",
}

// IPv6 ranges whose addresses reach an IPv4 address they embed: the well-known NAT64 prefix
// (the last 32 bits), 6to4 (bits 16 to 48) and the deprecated IPv4-compatible form ::a.b.c.d
// (the last 32 bits; :: and ::1 are refused on their own). IPv4-mapped addresses are unmapped
// before anything is decided.
var (
	nat64        = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour    = netip.MustParsePrefix("2002::/16")
	v4Compatible = netip.MustParsePrefix("::/96")
)

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
		// Addresses are unmapped before they are decided: an IPv4-mapped range
		// (::ffff:10.0.0.0/104) is its IPv4 range, or it would never match.
		if prefix.Addr().Is4In6() && prefix.Bits() >= 96 {
			prefix = netip.PrefixFrom(prefix.Addr().Unmap(), prefix.Bits()-96)
		}
		out = append(out, prefix)
	}
	return out, nil
}

// Allows tells whether addr may be dialled: addr itself and, for an IPv6 address that embeds
// an IPv4 address, that address too.
func (p *AddressPolicy) Allows(addr netip.Addr) bool {
	addr = addr.Unmap()
	if !p.decide(addr) {
		return false
	}
	if v4, ok := embeddedIPv4(addr); ok {
		return p.decide(v4)
	}
	return true
}

// embeddedIPv4 is the IPv4 address an IPv6 address of nat64, sixToFour or v4Compatible reaches.
func embeddedIPv4(addr netip.Addr) (netip.Addr, bool) {
	if !addr.Is6() {
		return netip.Addr{}, false
	}
	b := addr.As16()
	switch {
	case v4Compatible.Contains(addr) && (addr.IsLoopback() || addr.IsUnspecified()):
		// ::1 and :: are themselves, not 0.0.0.1 and 0.0.0.0 (an allowed ::1 stays allowed).
		return netip.Addr{}, false
	case nat64.Contains(addr), v4Compatible.Contains(addr):
		return netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}), true
	case sixToFour.Contains(addr):
		return netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}), true
	}
	return netip.Addr{}, false
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
