package rule

// MatchField describes one packet field rules can match, in every form the
// engines hold it: the packet accessor, the bits it takes in the worker's
// flow-cache key (swpath/classifier) and in the simulated hardware table's
// key (offload/sim), the tc flower attribute the hardware path programs
// (include/uapi/linux/pkt_cls.h), and its offset in the XDP program's
// parsed packet (struct pkt in swpath/xdp/bpf/scrub.c). The flow-cache
// and simulated-table key packers are generated from it (internal/keygen;
// run go generate in swpath/classifier and offload/sim after a change, a
// test fails while the committed packers differ). Tests check every key
// packing and the BPF layout against this table, and vary each field in
// turn through every engine (tests/varyfield); a field added here and
// missed in one of those places fails them.
type MatchField struct {
	// Name is the rule-file key (docs/rules.md), or the packet property
	// for family, L4 and fragment state.
	Name string
	// Width is the field's width in bits in Fields.
	Width int
	// Member is the member of Fields that holds the field. The key packers
	// (swpath/classifier's cachekey_gen.go, offload/sim's simkey_gen.go)
	// are generated from it and the key columns by internal/keygen.
	Member string
	// Get returns the field of f (addresses: the high and low words).
	Get func(f *Fields) (hi, lo uint64)
	// Set stores v (its low Width bits; addresses: hi and lo) into f.
	Set func(f *Fields, hi, lo uint64)
	// CacheKey is the bits of the flow-cache key (six 64-bit words) that
	// hold the field.
	CacheKey [6]uint64
	// SimKey is the bits of offload/sim's entry key (six words) that the
	// field reaches through offload.KeyOf; zero where the hardware has no
	// key for it.
	SimKey [6]uint64
	// SimMember is the member of offload.PacketKey and offload.Match
	// that carries the field to the hardware key ("" where none); it sits
	// in the key at SimKey's lowest bit rounded down to the member's
	// width (DSCP reaches bits 2-7 of the TOS byte).
	SimMember string
	// Flower names the tc flower key attributes (TCA_FLOWER_KEY_*), "" for
	// none.
	Flower string
	// BPF is the member of struct pkt that holds it and BPFOffset its
	// byte offset there; "" where the program has no member of its own.
	BPF       string
	BPFOffset int
}

func u(v uint64) (uint64, uint64) { return 0, v }

// MatchFields is the table. Order: the flow-cache key's.
var MatchFields = []MatchField{
	{Name: "family", Width: 8, Member: "Family", SimMember: "Family",
		Get:      func(f *Fields) (uint64, uint64) { return u(uint64(f.Family)) },
		Set:      func(f *Fields, _, v uint64) { f.Family = Family(v) },
		CacheKey: [6]uint64{0xff}, SimKey: [6]uint64{4: 0xff << 24},
		Flower: "TCA_FLOWER_KEY_ETH_TYPE", BPF: "t.fam", BPFOffset: 0},
	{Name: "protocol", Width: 8, Member: "Proto", SimMember: "Proto",
		Get:      func(f *Fields) (uint64, uint64) { return u(uint64(f.Proto)) },
		Set:      func(f *Fields, _, v uint64) { f.Proto = uint8(v) },
		CacheKey: [6]uint64{0xff << 8}, SimKey: [6]uint64{4: 0xff << 16},
		Flower: "TCA_FLOWER_KEY_IP_PROTO", BPF: "t.proto", BPFOffset: 1},
	{Name: "l4", Width: 1, Member: "L4",
		Get: func(f *Fields) (uint64, uint64) {
			if f.L4 {
				return 0, 1
			}
			return 0, 0
		},
		Set:      func(f *Fields, _, v uint64) { f.L4 = v&1 != 0 },
		CacheKey: [6]uint64{1 << 16},
		BPF:      "l4", BPFOffset: 48},
	{Name: "fragment", Width: 8, Member: "Frag", SimMember: "Flags",
		Get:      func(f *Fields) (uint64, uint64) { return u(uint64(f.Frag)) },
		Set:      func(f *Fields, _, v uint64) { f.Frag = Frag(v) },
		CacheKey: [6]uint64{0xff << 24}, SimKey: [6]uint64{5: 0xff},
		Flower: "TCA_FLOWER_KEY_FLAGS", BPF: "frag", BPFOffset: 54},
	{Name: "dscp", Width: 6, Member: "DSCP", SimMember: "TOS",
		Get:      func(f *Fields) (uint64, uint64) { return u(uint64(f.DSCP)) },
		Set:      func(f *Fields, _, v uint64) { f.DSCP = uint8(v) & 63 },
		CacheKey: [6]uint64{0x3f << 32}, SimKey: [6]uint64{4: 0xfc},
		Flower: "TCA_FLOWER_KEY_IP_TOS", BPF: "dscp", BPFOffset: 55},
	{Name: "tcp_flags", Width: 8, Member: "TCPFlags", SimMember: "TCPFlags",
		Get:      func(f *Fields) (uint64, uint64) { return u(uint64(f.TCPFlags)) },
		Set:      func(f *Fields, _, v uint64) { f.TCPFlags = uint8(v) },
		CacheKey: [6]uint64{0xff << 40}, SimKey: [6]uint64{4: 0xff << 8},
		Flower: "TCA_FLOWER_KEY_TCP_FLAGS", BPF: "tcp_flags", BPFOffset: 51},
	{Name: "icmp_type", Width: 8, Member: "ICMPType", SimMember: "ICMPType",
		Get:      func(f *Fields) (uint64, uint64) { return u(uint64(f.ICMPType)) },
		Set:      func(f *Fields, _, v uint64) { f.ICMPType = uint8(v) },
		CacheKey: [6]uint64{0xff << 48}, SimKey: [6]uint64{5: 0xff << 16},
		Flower: "TCA_FLOWER_KEY_ICMPV4_TYPE/ICMPV6_TYPE", BPF: "itype", BPFOffset: 52},
	{Name: "icmp_code", Width: 8, Member: "ICMPCode", SimMember: "ICMPCode",
		Get:      func(f *Fields) (uint64, uint64) { return u(uint64(f.ICMPCode)) },
		Set:      func(f *Fields, _, v uint64) { f.ICMPCode = uint8(v) },
		CacheKey: [6]uint64{0xff << 56}, SimKey: [6]uint64{5: 0xff << 8},
		Flower: "TCA_FLOWER_KEY_ICMPV4_CODE/ICMPV6_CODE", BPF: "icode", BPFOffset: 53},
	{Name: "src_port", Width: 16, Member: "SrcPort", SimMember: "SrcPort",
		Get:      func(f *Fields) (uint64, uint64) { return u(uint64(f.SrcPort)) },
		Set:      func(f *Fields, _, v uint64) { f.SrcPort = uint16(v) },
		CacheKey: [6]uint64{1: 0xffff}, SimKey: [6]uint64{4: 0xffff << 48},
		Flower: "TCA_FLOWER_KEY_TCP_SRC/UDP_SRC/SCTP_SRC, TCA_FLOWER_KEY_PORT_SRC_MIN/MAX", BPF: "sport", BPFOffset: 44},
	{Name: "dst_port", Width: 16, Member: "DstPort", SimMember: "DstPort",
		Get:      func(f *Fields) (uint64, uint64) { return u(uint64(f.DstPort)) },
		Set:      func(f *Fields, _, v uint64) { f.DstPort = uint16(v) },
		CacheKey: [6]uint64{1: 0xffff << 16}, SimKey: [6]uint64{4: 0xffff << 32},
		Flower: "TCA_FLOWER_KEY_TCP_DST/UDP_DST/SCTP_DST, TCA_FLOWER_KEY_PORT_DST_MIN/MAX", BPF: "dport", BPFOffset: 46},
	{Name: "length", Width: 32, Member: "Length",
		Get:      func(f *Fields) (uint64, uint64) { return u(uint64(f.Length)) },
		Set:      func(f *Fields, _, v uint64) { f.Length = uint32(v) },
		CacheKey: [6]uint64{1: 0xffffffff << 32},
		BPF:      "len", BPFOffset: 40},
	{Name: "source", Width: 128, Member: "Src", SimMember: "Src",
		Get:      func(f *Fields) (uint64, uint64) { return f.Src.Hi, f.Src.Lo },
		Set:      func(f *Fields, hi, lo uint64) { f.Src = Addr{hi, lo} },
		CacheKey: [6]uint64{2: ^uint64(0), 3: ^uint64(0)}, SimKey: [6]uint64{0: ^uint64(0), 1: ^uint64(0)},
		Flower: "TCA_FLOWER_KEY_IPV4_SRC/IPV6_SRC", BPF: "t.src", BPFOffset: 8},
	{Name: "destination", Width: 128, Member: "Dst", SimMember: "Dst",
		Get:      func(f *Fields) (uint64, uint64) { return f.Dst.Hi, f.Dst.Lo },
		Set:      func(f *Fields, hi, lo uint64) { f.Dst = Addr{hi, lo} },
		CacheKey: [6]uint64{4: ^uint64(0), 5: ^uint64(0)}, SimKey: [6]uint64{2: ^uint64(0), 3: ^uint64(0)},
		Flower: "TCA_FLOWER_KEY_IPV4_DST/IPV6_DST", BPF: "t.dst", BPFOffset: 24},
}
