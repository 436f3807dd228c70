package bifrost_test

import (
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/opi"
)

var _ = Describe("ConvertDesire's isolation fields", func() {
	convert := func(key string, value any) (*opi.LRP, error) {
		return bifrost.ConvertDesire(with(func(m map[string]any) { m[key] = value }), bifrost.Rules{})
	}

	Describe("egress_rules", func() {
		It("reads snake_case and camelCase keys alike", func() {
			lrp, err := convert("egress_rules", []any{
				map[string]any{"protocol": "tcp", "destinations": []any{"10.0.0.0/8"}, "ports": []any{80, 443}, "port_range": map[string]any{"start": 8000, "end": 8080}},
				map[string]any{"protocol": "UDP", "destinations": []any{"1.1.1.1"}, "portRange": map[string]any{"start": 53, "end": 53}},
				map[string]any{"protocol": "icmp", "destinations": []any{"0.0.0.0/0"}, "icmpInfo": map[string]any{"type": 8, "code": 0}},
				map[string]any{"protocol": "all", "destinations": []any{"2001:db8::/32"}},
			})
			Expect(err).NotTo(HaveOccurred())
			Expect(lrp.EgressRules).To(Equal([]opi.EgressRule{
				{Protocol: "tcp", Destinations: []string{"10.0.0.0/8"}, Ports: []opi.PortRange{{Start: 80, End: 80}, {Start: 443, End: 443}, {Start: 8000, End: 8080}}, ICMPType: -1, ICMPCode: -1},
				{Protocol: "udp", Destinations: []string{"1.1.1.1/32"}, Ports: []opi.PortRange{{Start: 53, End: 53}}, ICMPType: -1, ICMPCode: -1},
				{Protocol: "icmp", Destinations: []string{"0.0.0.0/0"}, ICMPType: 8, ICMPCode: 0},
				{Protocol: "all", Destinations: []string{"2001:db8::/32"}, ICMPType: -1, ICMPCode: -1},
			}))
		})

		DescribeTable("turns an address range into the CIDRs covering exactly it",
			func(dest string, want []string) {
				lrp, err := convert("egress_rules", []any{map[string]any{"protocol": "all", "destinations": []any{dest}}})
				Expect(err).NotTo(HaveOccurred())
				Expect(lrp.EgressRules[0].Destinations).To(Equal(want))
			},
			Entry("a whole /24", "10.0.0.0-10.0.0.255", []string{"10.0.0.0/24"}),
			Entry("an unaligned range", "10.0.0.1-10.0.0.6", []string{"10.0.0.1/32", "10.0.0.2/31", "10.0.0.4/31", "10.0.0.6/32"}),
			Entry("one address", "192.168.1.7-192.168.1.7", []string{"192.168.1.7/32"}),
			Entry("everything", "0.0.0.0-255.255.255.255", []string{"0.0.0.0/0"}),
			Entry("CC's public networks piece", "11.0.0.0-169.253.255.255", []string{"11.0.0.0/8", "12.0.0.0/6", "16.0.0.0/4", "32.0.0.0/3", "64.0.0.0/2", "128.0.0.0/3", "160.0.0.0/5", "168.0.0.0/8", "169.0.0.0/9", "169.128.0.0/10", "169.192.0.0/11", "169.224.0.0/12", "169.240.0.0/13", "169.248.0.0/14", "169.252.0.0/15"}),
			Entry("an unmasked CIDR", "10.1.2.3/8", []string{"10.0.0.0/8"}),
			Entry("several joined by commas", "10.0.0.0/8,192.168.0.1-192.168.0.2", []string{"10.0.0.0/8", "192.168.0.1/32", "192.168.0.2/32"}),
		)

		DescribeTable("rejects what it cannot read, naming the rule",
			func(rule map[string]any, field string) {
				_, err := convert("egress_rules", []any{rule})
				Expect(errors.Is(err, opi.ErrInvalid)).To(BeTrue())
				var verr *bifrost.ValidationError
				Expect(errors.As(err, &verr)).To(BeTrue())
				Expect(verr.Field).To(Equal(field))
			},
			Entry("unknown protocol", map[string]any{"protocol": "sctp", "destinations": []any{"1.2.3.4"}}, "egress_rules[0].protocol"),
			Entry("no destinations", map[string]any{"protocol": "tcp"}, "egress_rules[0].destinations"),
			Entry("a bad destination", map[string]any{"protocol": "tcp", "destinations": []any{"10.0.0.300"}}, "egress_rules[0].destinations[0]"),
			Entry("a reversed range", map[string]any{"protocol": "tcp", "destinations": []any{"10.0.0.9-10.0.0.1"}}, "egress_rules[0].destinations[0]"),
			Entry("a range across families", map[string]any{"protocol": "tcp", "destinations": []any{"10.0.0.1-::2"}}, "egress_rules[0].destinations[0]"),
			Entry("a port out of range", map[string]any{"protocol": "tcp", "destinations": []any{"1.2.3.4"}, "ports": []any{70000}}, "egress_rules[0].ports[0]"),
			Entry("a reversed port range", map[string]any{"protocol": "tcp", "destinations": []any{"1.2.3.4"}, "port_range": map[string]any{"start": 9, "end": 1}}, "egress_rules[0].port_range"),
			Entry("ports on an all rule", map[string]any{"protocol": "all", "destinations": []any{"1.2.3.4"}, "ports": []any{80}}, "egress_rules[0]"),
			Entry("icmp_info on a tcp rule", map[string]any{"protocol": "tcp", "destinations": []any{"1.2.3.4"}, "icmp_info": map[string]any{"type": 0}}, "egress_rules[0]"),
			Entry("not an object", map[string]any{"protocol": []any{1}}, "egress_rules[0]"),
		)
	})

	Describe("volume_mounts", func() {
		It("keeps each volume id and its cleaned mount directory", func() {
			lrp, err := convert("volume_mounts", []any{map[string]any{"volume_id": "pvc-1", "mount_dir": "/var/vcap/data/x/"}})
			Expect(err).NotTo(HaveOccurred())
			Expect(lrp.VolumeMounts).To(Equal([]opi.VolumeMount{{VolumeID: "pvc-1", MountDir: "/var/vcap/data/x"}}))
		})

		DescribeTable("rejects a mount that cannot be served",
			func(mounts []any, field string) {
				_, err := convert("volume_mounts", mounts)
				var verr *bifrost.ValidationError
				Expect(errors.As(err, &verr)).To(BeTrue())
				Expect(verr.Field).To(Equal(field))
			},
			Entry("no volume id", []any{map[string]any{"mount_dir": "/data"}}, "volume_mounts[0].volume_id"),
			Entry("a relative directory", []any{map[string]any{"volume_id": "v", "mount_dir": "data"}}, "volume_mounts[0].mount_dir"),
			Entry("the root", []any{map[string]any{"volume_id": "v", "mount_dir": "/"}}, "volume_mounts[0].mount_dir"),
			Entry("one directory twice", []any{map[string]any{"volume_id": "v", "mount_dir": "/d"}, map[string]any{"volume_id": "w", "mount_dir": "/d/"}}, "volume_mounts[1].mount_dir"),
		)
	})

	It("keeps the placement tags and rejects an empty one", func() {
		lrp, err := convert("placement_tags", []any{"iso-1"})
		Expect(err).NotTo(HaveOccurred())
		Expect(lrp.PlacementTags).To(Equal([]string{"iso-1"}))
		_, err = convert("placement_tags", []any{" "})
		Expect(errors.Is(err, opi.ErrInvalid)).To(BeTrue())
	})
})
