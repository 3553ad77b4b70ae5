package tcflower

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
)

// tcmsgLen is sizeof(struct tcmsg).
const tcmsgLen = 20

// tcmsg is struct tcmsg (rtnetlink.h), native byte order.
type tcmsg struct {
	Family  uint8
	Ifindex int32
	Handle  uint32
	Parent  uint32
	Info    uint32
}

func (t tcmsg) append(b []byte) []byte {
	var h [tcmsgLen]byte
	h[0] = t.Family
	binary.NativeEndian.PutUint32(h[4:], uint32(t.Ifindex))
	binary.NativeEndian.PutUint32(h[8:], t.Handle)
	binary.NativeEndian.PutUint32(h[12:], t.Parent)
	binary.NativeEndian.PutUint32(h[16:], t.Info)
	return append(b, h[:]...)
}

func parseTcmsg(b []byte) (tcmsg, error) {
	if len(b) < tcmsgLen {
		return tcmsg{}, fmt.Errorf("tcflower: tcmsg of %d bytes, need %d", len(b), tcmsgLen)
	}
	return tcmsg{
		Family:  b[0],
		Ifindex: int32(binary.NativeEndian.Uint32(b[4:])),
		Handle:  binary.NativeEndian.Uint32(b[8:]),
		Parent:  binary.NativeEndian.Uint32(b[12:]),
		Info:    binary.NativeEndian.Uint32(b[16:]),
	}, nil
}

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func be32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// filterHeader is the tcmsg of a filter request: info carries the priority
// in the upper half and the protocol, big-endian, in the lower half.
func (f *Filter) header() tcmsg {
	return tcmsg{
		Ifindex: int32(f.Ifindex),
		Handle:  f.Handle,
		Parent:  f.parent(),
		Info:    uint32(f.Prio)<<16 | uint32(htons(f.Protocol)),
	}
}

func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}

// MarshalBinary encodes the filter as the payload of an RTM_NEWTFILTER
// message (tcmsg, TCA_KIND "flower", TCA_CHAIN, TCA_OPTIONS). It does not
// validate; call Validate first (the Client does).
func (f *Filter) MarshalBinary() ([]byte, error) {
	opts, err := f.marshalOptions()
	if err != nil {
		return nil, err
	}
	ae := netlink.NewAttributeEncoder()
	ae.String(tcaKind, "flower")
	ae.Uint32(tcaChain, f.Chain)
	ae.Bytes(tcaOptions|netlink.Nested, opts)
	attrs, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	return append(f.header().append(make([]byte, 0, tcmsgLen+len(attrs))), attrs...), nil
}

func (f *Filter) marshalOptions() ([]byte, error) {
	k := &f.Key
	ae := netlink.NewAttributeEncoder()
	if k.EthType != 0 {
		ae.Bytes(flowerEthType, be16(k.EthType))
	}
	{ // Validate allows VLAN keys only with eth_type 802.1Q.
		if k.VLAN.HasID {
			ae.Uint16(flowerVLANID, k.VLAN.ID)
		}
		if k.VLAN.HasPrio {
			ae.Uint8(flowerVLANPrio, k.VLAN.Prio)
		}
		if k.VLAN.EthType != 0 {
			ae.Bytes(flowerVLANEthType, be16(k.VLAN.EthType))
		}
	}
	if k.IPProto != 0 {
		ae.Uint8(flowerIPProto, k.IPProto)
	}
	putAddr := func(v4, v4m, v6, v6m uint16, a AddrMask) {
		if !a.Set() {
			return
		}
		if a.Addr.Is4() {
			ae.Bytes(v4, a.Addr.AsSlice())
			ae.Bytes(v4m, a.Mask.AsSlice())
		} else {
			ae.Bytes(v6, a.Addr.AsSlice())
			ae.Bytes(v6m, a.Mask.AsSlice())
		}
	}
	putAddr(flowerIPv4Src, flowerIPv4SrcMask, flowerIPv6Src, flowerIPv6SrcMask, k.Src)
	putAddr(flowerIPv4Dst, flowerIPv4DstMask, flowerIPv6Dst, flowerIPv6DstMask, k.Dst)
	src, srcM, dst, dstM := uint16(flowerTCPSrc), uint16(flowerTCPSrcMask), uint16(flowerTCPDst), uint16(flowerTCPDstMask)
	if k.IPProto == IPProtoUDP {
		src, srcM, dst, dstM = flowerUDPSrc, flowerUDPSrcMask, flowerUDPDst, flowerUDPDstMask
	}
	if k.SrcPort.Set() {
		ae.Bytes(src, be16(k.SrcPort.Port))
		ae.Bytes(srcM, be16(k.SrcPort.Mask))
	}
	if k.DstPort.Set() {
		ae.Bytes(dst, be16(k.DstPort.Port))
		ae.Bytes(dstM, be16(k.DstPort.Mask))
	}
	if k.TCPFlagsMask != 0 {
		ae.Bytes(flowerTCPFlags, be16(k.TCPFlags))
		ae.Bytes(flowerTCPFlagsMask, be16(k.TCPFlagsMask))
	}
	if k.IPFlagsMask != 0 {
		ae.Bytes(flowerKeyFlags, be32(k.IPFlags))
		ae.Bytes(flowerKeyFlagsMask, be32(k.IPFlagsMask))
	}
	if k.TOSMask != 0 {
		ae.Uint8(flowerIPTOS, k.TOS)
		ae.Uint8(flowerIPTOSMask, k.TOSMask)
	}
	typ, typM, code, codeM := uint16(flowerICMPv4Type), uint16(flowerICMPv4TypeMsk), uint16(flowerICMPv4Code), uint16(flowerICMPv4CodeMsk)
	if k.IPProto == IPProtoICMPv6 {
		typ, typM, code, codeM = flowerICMPv6Type, flowerICMPv6TypeMsk, flowerICMPv6Code, flowerICMPv6CodeMsk
	}
	if k.ICMPTypeMask != 0 {
		ae.Uint8(typ, k.ICMPType)
		ae.Uint8(typM, k.ICMPTypeMask)
	}
	if k.ICMPCodeMask != 0 {
		ae.Uint8(code, k.ICMPCode)
		ae.Uint8(codeM, k.ICMPCodeMask)
	}
	// Host byte order: cls_flower reads it with nla_get_u32.
	ae.Uint32(flowerFlags, uint32(f.Flags))
	if len(f.Actions) > 0 {
		ae.Nested(flowerAct, func(nae *netlink.AttributeEncoder) error {
			for i := range f.Actions {
				a := &f.Actions[i]
				nae.Nested(uint16(i+1), func(aae *netlink.AttributeEncoder) error {
					aae.String(actKind, a.Kind)
					aae.Nested(actOptions, func(oae *netlink.AttributeEncoder) error {
						// struct tc_gact { index, capab, action, refcnt, bindcnt }.
						var p [20]byte
						binary.NativeEndian.PutUint32(p[0:], a.Index)
						binary.NativeEndian.PutUint32(p[8:], uint32(a.Verdict))
						oae.Bytes(gactParms, p[:])
						return nil
					})
					if len(a.Cookie) > 0 {
						aae.Bytes(actCookie, a.Cookie)
					}
					return nil
				})
			}
			return nil
		})
	}
	return ae.Encode()
}

// UnmarshalBinary decodes the payload of an RTM_NEWTFILTER message (a
// request or a dump reply) into f. Unknown attributes are ignored; filters
// of another kind return an error wrapping ErrNotFlower.
func (f *Filter) UnmarshalBinary(b []byte) error {
	h, err := parseTcmsg(b)
	if err != nil {
		return err
	}
	*f = Filter{
		Ifindex:  int(h.Ifindex),
		Parent:   h.Parent,
		Handle:   h.Handle,
		Prio:     uint16(h.Info >> 16),
		Protocol: htons(uint16(h.Info)),
	}
	ad, err := netlink.NewAttributeDecoder(b[tcmsgLen:])
	if err != nil {
		return fmt.Errorf("tcflower: attributes: %w", err)
	}
	var kind string
	var opts []byte
	for ad.Next() {
		switch ad.Type() {
		case tcaKind:
			kind = ad.String()
		case tcaChain:
			f.Chain = ad.Uint32()
		case tcaOptions:
			opts = ad.Bytes()
		}
	}
	if err := ad.Err(); err != nil {
		return fmt.Errorf("tcflower: attributes: %w", err)
	}
	if kind != "flower" {
		return fmt.Errorf("%w: kind %q", ErrNotFlower, kind)
	}
	if opts == nil {
		// A filter-chain head (tcf_proto) dump without options: no key.
		return nil
	}
	return f.unmarshalOptions(opts)
}

// ErrNotFlower is returned when decoding a filter of another classifier.
var ErrNotFlower = errors.New("tcflower: not a flower filter")

func addrFrom(b []byte, n int) (netip.Addr, error) {
	if len(b) != n {
		return netip.Addr{}, fmt.Errorf("tcflower: address of %d bytes, want %d", len(b), n)
	}
	a, _ := netip.AddrFromSlice(b)
	return a, nil
}

func (f *Filter) unmarshalOptions(b []byte) error {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return fmt.Errorf("tcflower: options: %w", err)
	}
	k := &f.Key
	u16be := func() uint16 {
		var v uint16
		ad.Do(func(b []byte) error {
			if len(b) != 2 {
				return fmt.Errorf("tcflower: attribute %d: %d bytes, want 2", ad.Type(), len(b))
			}
			v = binary.BigEndian.Uint16(b)
			return nil
		})
		return v
	}
	u32be := func() uint32 {
		var v uint32
		ad.Do(func(b []byte) error {
			if len(b) != 4 {
				return fmt.Errorf("tcflower: attribute %d: %d bytes, want 4", ad.Type(), len(b))
			}
			v = binary.BigEndian.Uint32(b)
			return nil
		})
		return v
	}
	addr := func(dst *netip.Addr, n int) {
		ad.Do(func(b []byte) error {
			a, err := addrFrom(b, n)
			*dst = a
			return err
		})
	}
	for ad.Next() {
		switch ad.Type() {
		case flowerEthType:
			k.EthType = u16be()
		case flowerVLANID:
			k.VLAN.ID, k.VLAN.HasID = ad.Uint16(), true
		case flowerVLANPrio:
			k.VLAN.Prio, k.VLAN.HasPrio = ad.Uint8(), true
		case flowerVLANEthType:
			k.VLAN.EthType = u16be()
		case flowerIPProto:
			k.IPProto = ad.Uint8()
		case flowerIPv4Src:
			addr(&k.Src.Addr, 4)
		case flowerIPv4SrcMask:
			addr(&k.Src.Mask, 4)
		case flowerIPv4Dst:
			addr(&k.Dst.Addr, 4)
		case flowerIPv4DstMask:
			addr(&k.Dst.Mask, 4)
		case flowerIPv6Src:
			addr(&k.Src.Addr, 16)
		case flowerIPv6SrcMask:
			addr(&k.Src.Mask, 16)
		case flowerIPv6Dst:
			addr(&k.Dst.Addr, 16)
		case flowerIPv6DstMask:
			addr(&k.Dst.Mask, 16)
		case flowerTCPSrc, flowerUDPSrc:
			k.SrcPort.Port = u16be()
		case flowerTCPSrcMask, flowerUDPSrcMask:
			k.SrcPort.Mask = u16be()
		case flowerTCPDst, flowerUDPDst:
			k.DstPort.Port = u16be()
		case flowerTCPDstMask, flowerUDPDstMask:
			k.DstPort.Mask = u16be()
		case flowerTCPFlags:
			k.TCPFlags = u16be()
		case flowerTCPFlagsMask:
			k.TCPFlagsMask = u16be()
		case flowerKeyFlags:
			k.IPFlags = u32be()
		case flowerKeyFlagsMask:
			k.IPFlagsMask = u32be()
		case flowerIPTOS:
			k.TOS = ad.Uint8()
		case flowerIPTOSMask:
			k.TOSMask = ad.Uint8()
		case flowerICMPv4Type, flowerICMPv6Type:
			k.ICMPType = ad.Uint8()
		case flowerICMPv4TypeMsk, flowerICMPv6TypeMsk:
			k.ICMPTypeMask = ad.Uint8()
		case flowerICMPv4Code, flowerICMPv6Code:
			k.ICMPCode = ad.Uint8()
		case flowerICMPv4CodeMsk, flowerICMPv6CodeMsk:
			k.ICMPCodeMask = ad.Uint8()
		case flowerFlags:
			f.Flags = Flags(ad.Uint32())
		case flowerInHWCount:
			f.InHWCount = ad.Uint32()
		case flowerAct:
			ad.Do(func(b []byte) error {
				acts, err := unmarshalActions(b)
				f.Actions = acts
				return err
			})
		}
	}
	if err := ad.Err(); err != nil {
		return fmt.Errorf("tcflower: flower options: %w", err)
	}
	// cls_flower dumps the encapsulated protocol (key->basic.n_proto) as
	// TCA_FLOWER_KEY_ETH_TYPE of an 802.1Q filter, next to VLAN_ETH_TYPE
	// (fl_dump_key, seen on Linux 6.1 in the kernel lab); it only accepts
	// VLAN keys under eth_type 802.1Q, so that is what the key was written as.
	if k.VLAN.HasID || k.VLAN.HasPrio || k.VLAN.EthType != 0 {
		k.EthType = Proto8021Q
	}
	// An address attribute without its mask (or the reverse) is not a key.
	for _, a := range []*AddrMask{&k.Src, &k.Dst} {
		if a.Addr.IsValid() != a.Mask.IsValid() || (a.Addr.IsValid() && a.Addr.BitLen() != a.Mask.BitLen()) {
			return fmt.Errorf("tcflower: address %v with mask %v", a.Addr, a.Mask)
		}
		if !a.Set() {
			*a = AddrMask{}
		}
	}
	// A value whose mask is zero matches nothing: cls_flower never dumps
	// one, and the encoder never sends one. Normalize so decoding is stable.
	if k.SrcPort.Mask == 0 {
		k.SrcPort.Port = 0
	}
	if k.DstPort.Mask == 0 {
		k.DstPort.Port = 0
	}
	if k.TCPFlagsMask == 0 {
		k.TCPFlags = 0
	}
	if k.IPFlagsMask == 0 {
		k.IPFlags = 0
	}
	if k.TOSMask == 0 {
		k.TOS = 0
	}
	if k.ICMPTypeMask == 0 {
		k.ICMPType = 0
	}
	if k.ICMPCodeMask == 0 {
		k.ICMPCode = 0
	}
	return nil
}

func unmarshalActions(b []byte) ([]Action, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, fmt.Errorf("tcflower: actions: %w", err)
	}
	var acts []Action
	for ad.Next() {
		var a Action
		ad.Do(func(b []byte) error { return a.unmarshal(b) })
		if ad.Err() == nil {
			acts = append(acts, a)
		}
	}
	if err := ad.Err(); err != nil {
		return nil, fmt.Errorf("tcflower: actions: %w", err)
	}
	return acts, nil
}

func (a *Action) unmarshal(b []byte) error {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return err
	}
	for ad.Next() {
		switch ad.Type() {
		case actKind:
			a.Kind = ad.String()
		case actIndex:
			a.Index = ad.Uint32()
		case actCookie:
			if b := ad.Bytes(); len(b) > 0 {
				a.Cookie = append([]byte(nil), b...)
			}
		case actOptions:
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				for nad.Next() {
					switch nad.Type() {
					case gactParms:
						nad.Do(func(b []byte) error {
							if len(b) < 20 {
								return fmt.Errorf("tcflower: tc_gact of %d bytes, want 20", len(b))
							}
							a.Index = binary.NativeEndian.Uint32(b[0:])
							a.Verdict = int32(binary.NativeEndian.Uint32(b[8:]))
							return nil
						})
					case gactTM:
						nad.Do(func(b []byte) error {
							if len(b) < 32 {
								return fmt.Errorf("tcflower: tcf_t of %d bytes, want 32", len(b))
							}
							a.Times = Times{
								Install:  binary.NativeEndian.Uint64(b[0:]),
								LastUse:  binary.NativeEndian.Uint64(b[8:]),
								Expires:  binary.NativeEndian.Uint64(b[16:]),
								FirstUse: binary.NativeEndian.Uint64(b[24:]),
							}
							return nil
						})
					}
				}
				return nil
			})
		case actStats:
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				a.Stats.Present = true
				// TCA_STATS_PKT64 follows a TCA_STATS_BASIC or _BASIC_HW whose
				// u32 packet count was truncated and carries the full count
				// (___gnet_stats_copy_basic).
				lastHW := false
				for nad.Next() {
					switch nad.Type() {
					case statsBasic, statsBasicHW:
						hw := nad.Type() == statsBasicHW
						lastHW = hw
						nad.Do(func(b []byte) error {
							// struct gnet_stats_basic { __u64 bytes; __u32 packets; } (16 with padding).
							if len(b) < 12 {
								return fmt.Errorf("tcflower: gnet_stats_basic of %d bytes, want >= 12", len(b))
							}
							by, pk := binary.NativeEndian.Uint64(b[0:]), uint64(binary.NativeEndian.Uint32(b[8:]))
							if hw {
								a.Stats.HWBytes, a.Stats.HWPackets = by, pk
							} else {
								a.Stats.Bytes, a.Stats.Packets = by, pk
							}
							return nil
						})
					case statsPkt64:
						if v := nad.Uint64(); lastHW {
							a.Stats.HWPackets = v
						} else {
							a.Stats.Packets = v
						}
					case statsQueue:
						nad.Do(func(b []byte) error {
							// struct gnet_stats_queue { qlen, backlog, drops, requeues, overlimits }.
							if len(b) < 20 {
								return fmt.Errorf("tcflower: gnet_stats_queue of %d bytes, want 20", len(b))
							}
							a.Stats.Drops = uint64(binary.NativeEndian.Uint32(b[8:]))
							return nil
						})
					}
				}
				return nil
			})
		}
	}
	return ad.Err()
}
