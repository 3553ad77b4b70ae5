package tcflower

// Netlink message types (include/uapi/linux/rtnetlink.h).
const (
	rtmNewQdisc  = 36
	rtmDelQdisc  = 37
	rtmNewFilter = 44
	rtmDelFilter = 45
	rtmGetFilter = 46
)

// Top-level TCA_* attributes.
const (
	tcaKind      = 1
	tcaOptions   = 2
	tcaChain     = 11
	tcaDumpFlags = 15
	tcaExtWarn   = 16
)

// TCA_FLOWER_* attributes (pkt_cls.h, Linux 6.1).
const (
	flowerAct           = 3
	flowerEthType       = 8  // be16
	flowerIPProto       = 9  // u8
	flowerIPv4Src       = 10 // be32
	flowerIPv4SrcMask   = 11
	flowerIPv4Dst       = 12
	flowerIPv4DstMask   = 13
	flowerIPv6Src       = 14 // in6_addr
	flowerIPv6SrcMask   = 15
	flowerIPv6Dst       = 16
	flowerIPv6DstMask   = 17
	flowerTCPSrc        = 18 // be16
	flowerTCPDst        = 19
	flowerUDPSrc        = 20
	flowerUDPDst        = 21
	flowerFlags         = 22 // u32 host order
	flowerVLANID        = 23 // u16 host order
	flowerVLANPrio      = 24 // u8
	flowerVLANEthType   = 25 // be16
	flowerTCPSrcMask    = 35
	flowerTCPDstMask    = 36
	flowerUDPSrcMask    = 37
	flowerUDPDstMask    = 38
	flowerKeyFlags      = 47 // be32
	flowerKeyFlagsMask  = 48 // be32
	flowerICMPv4Code    = 49 // u8
	flowerICMPv4CodeMsk = 50
	flowerICMPv4Type    = 51
	flowerICMPv4TypeMsk = 52
	flowerICMPv6Code    = 53
	flowerICMPv6CodeMsk = 54
	flowerICMPv6Type    = 55
	flowerICMPv6TypeMsk = 56
	flowerTCPFlags      = 71 // be16
	flowerTCPFlagsMask  = 72
	flowerIPTOS         = 73 // u8
	flowerIPTOSMask     = 74
	flowerInHWCount     = 86 // u32
)

// Action attributes (pkt_cls.h TCA_ACT_*, tc_gact.h TCA_GACT_*).
const (
	actKind    = 1
	actOptions = 2
	actIndex   = 3
	actStats   = 4
	actCookie  = 6

	gactTM    = 1
	gactParms = 2

	// CookieMaxLen is TC_COOKIE_MAX_SIZE.
	CookieMaxLen = 16
)

// Generic statistics (gen_stats.h TCA_STATS_*).
const (
	statsBasic   = 1
	statsQueue   = 3
	statsBasicHW = 7
	statsPkt64   = 8
)

// tc handles (pkt_sched.h).
const (
	// HandleClsact is TC_H_CLSACT (== TC_H_INGRESS), the parent of the
	// clsact and ingress qdiscs.
	HandleClsact = 0xFFFFFFF1
	// ParentIngress is TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_INGRESS): filters on
	// the ingress hook of a clsact or ingress qdisc.
	ParentIngress = 0xFFFFFFF2
	// ParentEgress is TC_H_MAKE(TC_H_CLSACT, TC_H_MIN_EGRESS).
	ParentEgress = 0xFFFFFFF3
	// qdiscHandle is the handle "ffff:" both clsact and ingress take.
	qdiscHandle = 0xFFFF0000
)

// Verdicts (pkt_cls.h TC_ACT_*).
const (
	ActOK   = 0
	ActShot = 2
)
