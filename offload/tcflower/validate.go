package tcflower

import (
	"fmt"
	"net/netip"
)

// ValidationError names the field and the value that make a filter unsafe
// or impossible to encode.
type ValidationError struct {
	Field  string
	Value  string
	Reason string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("tcflower: invalid %s %s: %s", e.Field, e.Value, e.Reason)
}

func verr(field string, value any, reason string) error {
	return &ValidationError{Field: field, Value: fmt.Sprint(value), Reason: reason}
}

// Validate checks that the kernel will match exactly what the filter says.
// cls_flower silently ignores keys whose prerequisites are missing (ports
// without ip_proto tcp/udp, IP keys without an IP eth_type, ICMP keys
// without ip_proto icmp/icmpv6), which for a drop rule means dropping more
// than intended; Validate refuses such filters. It also requires values to
// be masked, so dumps read back equal.
func (f *Filter) Validate() error {
	if f.Ifindex <= 0 {
		return verr("ifindex", f.Ifindex, "must be > 0")
	}
	if f.Protocol == 0 {
		return verr("protocol", f.Protocol, "must be set (ProtoIPv4, ProtoIPv6, Proto8021Q, ProtoAll)")
	}
	if f.Flags&^(SkipHW|SkipSW|Verbose) != 0 {
		return verr("flags", f.Flags, "only skip_hw, skip_sw and verbose can be requested")
	}
	if f.Flags&(SkipHW|SkipSW) == SkipHW|SkipSW {
		return verr("flags", f.Flags, "skip_hw and skip_sw together match nowhere")
	}
	k := &f.Key
	if k.EthType != 0 && f.Protocol != ProtoAll && k.EthType != f.Protocol {
		return verr("eth_type", fmt.Sprintf("%#04x", k.EthType), fmt.Sprintf("differs from filter protocol %#04x", f.Protocol))
	}
	l3 := k.EthType
	if k.EthType == Proto8021Q {
		l3 = k.VLAN.EthType
		if k.VLAN.HasID && k.VLAN.ID > 0xfff {
			return verr("vlan_id", k.VLAN.ID, "exceeds 12 bits")
		}
		if k.VLAN.HasPrio && k.VLAN.Prio > 7 {
			return verr("vlan_prio", k.VLAN.Prio, "exceeds 3 bits")
		}
		if l3 == Proto8021Q {
			return verr("vlan_eth_type", fmt.Sprintf("%#04x", l3), "double tagging is not supported")
		}
	} else if k.VLAN != (VLANKey{}) {
		return verr("vlan", k.VLAN, "needs eth_type 802.1Q")
	}
	isIP := l3 == ProtoIPv4 || l3 == ProtoIPv6
	needIP := k.IPProto != 0 || k.Src.Set() || k.Dst.Set() || k.TOSMask != 0 || k.IPFlagsMask != 0
	if needIP && !isIP {
		return verr("eth_type", fmt.Sprintf("%#04x", l3), "IP keys need eth_type IPv4 or IPv6")
	}
	for _, a := range []struct {
		n string
		v AddrMask
	}{{"src_ip", k.Src}, {"dst_ip", k.Dst}} {
		if !a.v.Set() {
			continue
		}
		if !a.v.Addr.IsValid() || a.v.Addr.BitLen() != a.v.Mask.BitLen() {
			return verr(a.n, a.v, "address and mask families differ")
		}
		if (l3 == ProtoIPv4) != a.v.Addr.Is4() {
			return verr(a.n, a.v, fmt.Sprintf("family does not match eth_type %#04x", l3))
		}
		if maskAddr(a.v.Addr, a.v.Mask) != a.v.Addr {
			return verr(a.n, a.v, "address has bits outside the mask")
		}
	}
	tcpudp := k.IPProto == IPProtoTCP || k.IPProto == IPProtoUDP
	for _, p := range []struct {
		n string
		v PortMask
	}{{"src_port", k.SrcPort}, {"dst_port", k.DstPort}} {
		if !p.v.Set() {
			if p.v.Port != 0 {
				return verr(p.n, p.v.Port, "port without mask")
			}
			continue
		}
		if !tcpudp {
			return verr(p.n, p.v.Port, fmt.Sprintf("ports need ip_proto tcp or udp, have %d", k.IPProto))
		}
		if p.v.Port&p.v.Mask != p.v.Port {
			return verr(p.n, fmt.Sprintf("%d/%#x", p.v.Port, p.v.Mask), "port has bits outside the mask")
		}
	}
	if k.TCPFlagsMask != 0 || k.TCPFlags != 0 {
		if k.IPProto != IPProtoTCP {
			return verr("tcp_flags", fmt.Sprintf("%#x", k.TCPFlags), "needs ip_proto tcp")
		}
		if k.TCPFlags&k.TCPFlagsMask != k.TCPFlags || k.TCPFlagsMask > 0x0fff {
			return verr("tcp_flags", fmt.Sprintf("%#x/%#x", k.TCPFlags, k.TCPFlagsMask), "value outside mask or mask beyond 12 bits")
		}
	}
	if k.IPFlags&k.IPFlagsMask != k.IPFlags || k.IPFlagsMask&^(IPFlagFrag|IPFlagFirstFrag) != 0 {
		return verr("ip_flags", fmt.Sprintf("%#x/%#x", k.IPFlags, k.IPFlagsMask), "only frag and firstfrag bits, value within mask")
	}
	if k.TOS&k.TOSMask != k.TOS {
		return verr("ip_tos", fmt.Sprintf("%#x/%#x", k.TOS, k.TOSMask), "value has bits outside the mask")
	}
	if k.ICMPTypeMask != 0 || k.ICMPCodeMask != 0 || k.ICMPType != 0 || k.ICMPCode != 0 {
		want := IPProtoICMP
		if l3 == ProtoIPv6 {
			want = IPProtoICMPv6
		}
		if k.IPProto != want {
			return verr("icmp", fmt.Sprintf("type %d code %d", k.ICMPType, k.ICMPCode), fmt.Sprintf("needs ip_proto %d for eth_type %#04x, have %d", want, l3, k.IPProto))
		}
		if k.ICMPType&k.ICMPTypeMask != k.ICMPType || k.ICMPCode&k.ICMPCodeMask != k.ICMPCode {
			return verr("icmp", fmt.Sprintf("type %d/%#x code %d/%#x", k.ICMPType, k.ICMPTypeMask, k.ICMPCode, k.ICMPCodeMask), "value has bits outside the mask")
		}
	}
	if len(f.Actions) == 0 {
		return verr("actions", 0, "at least one action is needed")
	}
	if len(f.Actions) > 32 {
		return verr("actions", len(f.Actions), "more than TCA_ACT_MAX_PRIO (32)")
	}
	for i, a := range f.Actions {
		if a.Kind != "gact" {
			return verr(fmt.Sprintf("actions[%d].kind", i), a.Kind, "only gact is supported")
		}
		if len(a.Cookie) > CookieMaxLen {
			return verr(fmt.Sprintf("actions[%d].cookie", i), len(a.Cookie), "longer than 16 bytes")
		}
	}
	return nil
}

func maskAddr(a, m netip.Addr) netip.Addr {
	ab, mb := a.AsSlice(), m.AsSlice()
	for i := range ab {
		ab[i] &= mb[i]
	}
	r, _ := netip.AddrFromSlice(ab)
	return r
}
