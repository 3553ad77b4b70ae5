package offload

import (
	"net/netip"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
)

// TestCookieStable pins the cookie of one entry: a restarted agent must
// compute the same cookie for the same rule, or reconcile would churn every
// entry. Change this value only together with a migration note.
func TestCookieStable(t *testing.T) {
	m := rule.Match{Dst: netip.MustParsePrefix("203.0.113.0/24"), Proto: []uint8{rule.ProtoUDP}, DstPort: rule.Ranges{{Lo: 53, Hi: 53}}}
	e := Entry{Prio: 10, Match: Match{Family: rule.IPv4, HasProto: true, Proto: rule.ProtoUDP, DstPort: 53, DstPortMask: 0xffff}}
	e.Match.Dst, e.Match.DstMask = rule.PrefixAddr(m.Dst)
	e.SetCookie(RuleHash("dns", &m))
	const want = "5c7d"
	if got := e.Cookie.String(); got[:4] != want || !e.Cookie.Ours() {
		t.Fatalf("cookie %s", got)
	}
	if got, golden := e.Cookie.String(), "5c7db4e052f7ce3fb88a19af2748a0fc"; got != golden {
		t.Fatalf("cookie %s, want %s", got, golden)
	}
	f := e
	f.Prio = 11
	f.SetCookie(RuleHash("dns", &m))
	if f.Cookie == e.Cookie || f.Cookie.RuleHash() != e.Cookie.RuleHash() {
		t.Fatal("table must change the entry part only")
	}
	if RuleHash("dns2", &m) == RuleHash("dns", &m) {
		t.Fatal("rule id not hashed")
	}
	// the same rule written differently hashes the same; a different one not
	m2 := m
	m2.Proto = []uint8{rule.ProtoUDP, rule.ProtoUDP}
	m2.DstPort = rule.Ranges{{Lo: 53, Hi: 53}, {Lo: 53, Hi: 53}}
	if RuleHash("dns", &m2) != RuleHash("dns", &m) {
		t.Fatal("equivalent rule hashed differently")
	}
	m2.DstPort = rule.Ranges{{Lo: 53, Hi: 54}}
	if RuleHash("dns", &m2) == RuleHash("dns", &m) {
		t.Fatal("different rule hashed the same")
	}
}

func TestKeyOfFragmentsAndL4(t *testing.T) {
	base := rule.Fields{Family: rule.IPv4, Proto: rule.ProtoTCP, L4: true, SrcPort: 1, DstPort: 2, TCPFlags: rule.SYN, DSCP: 46}
	for _, tt := range []struct {
		df, mf bool
		off    uint16
		flags  uint8
		l4     bool
	}{
		{false, false, 0, 0, true},
		{true, false, 0, 0, true},
		{false, true, 0, FlagFrag | FlagFirstFrag, true},
		{false, true, 8, FlagFrag, false},
		{false, false, 8, FlagFrag, false},
	} {
		f := base
		f.Frag = rule.FragState(tt.df, tt.mf, tt.off)
		f.L4 = tt.l4
		k, ok := KeyOf(&f)
		if !ok || k.Flags != tt.flags || k.TOS != 46<<2 {
			t.Errorf("%+v: key %+v", tt, k)
		}
		if tt.l4 != (k.DstPort == 2 && k.TCPFlags == rule.SYN) {
			t.Errorf("%+v: L4 fields %+v", tt, k)
		}
	}
	if _, ok := KeyOf(&rule.Fields{}); ok {
		t.Error("non-IP packet has a key")
	}
	// ICMP fields only for ICMP of the packet's family
	f := rule.Fields{Family: rule.IPv6, Proto: rule.ProtoICMP, L4: true, ICMPType: 8}
	if k, _ := KeyOf(&f); k.ICMPType != 0 {
		t.Errorf("ICMPv4 header read in IPv6: %+v", k)
	}
}

func TestMatchString(t *testing.T) {
	m := Match{Family: rule.IPv6, HasProto: true, Proto: 6, DstPort: 80, DstPortMask: 0xffff,
		TCPFlags: 2, TCPFlagsMask: 0x12, Flags: 0, FlagsMask: FlagFrag}
	m.Dst, m.DstMask = rule.PrefixAddr(netip.MustParsePrefix("2001:db8::/32"))
	want := "protocol ipv6 ip_proto 6 dst_ip 2001:db8::/32 dst_port 80/0xffff tcp_flags 0x02/0x12 ip_flags nofrag"
	if got := m.String(); got != want {
		t.Fatalf("%q\nwant %q", got, want)
	}
}
