package tcflower

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/offload/nlerr"
)

// The files in testdata/kernel-6.1 are netlink datagrams captured from
// Debian's 6.1.0-57-amd64 kernel in the kernel lab (tests/kernellab,
// TestCaptureKernelReplies and the netdevsim test), one hex datagram per
// line, as the kernel sent them to a raw socket with NETLINK_EXT_ACK on.

func loadCapture(t testing.TB, name string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "kernel-6.1", name+".hex"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, l := range strings.Fields(string(b)) {
		d, err := hex.DecodeString(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// replaySocket answers any request with the captured datagrams, each
// message's sequence and port id rewritten to the request's (the kernel
// copies them from the request).
type replaySocket struct {
	datagrams
	dgrams [][]byte
}

func (s *replaySocket) Close() error                 { return nil }
func (s *replaySocket) Send(m netlink.Message) error { return s.SendMessages([]netlink.Message{m}) }
func (s *replaySocket) SendMessages(ms []netlink.Message) error {
	for _, d := range s.dgrams {
		var msgs []netlink.Message
		for off := 0; off+16 <= len(d); {
			l := int(binary.NativeEndian.Uint32(d[off:]))
			var m netlink.Message
			if err := m.UnmarshalBinary(d[off : off+l]); err != nil {
				return err
			}
			m.Header.Sequence, m.Header.PID = ms[0].Header.Sequence, nltest.PID
			msgs = append(msgs, m)
			off += (l + 3) &^ 3
		}
		s.queue = append(s.queue, msgs)
	}
	return nil
}

func replayClient(t *testing.T, name string) *Client {
	return NewClient(netlink.NewConn(&replaySocket{dgrams: loadCapture(t, name)}, nltest.PID))
}

// capturedLab mirrors labFilters of tests/kernellab/guest as installed on
// the capture veth (ifindex 3 in the guest).
func capturedLab() []Filter {
	const ifindex = 3
	pfx := func(s string) AddrMask { return Prefix(netip.MustParsePrefix(s)) }
	v4 := func(h uint32, k Key) Filter {
		k.EthType = ProtoIPv4
		return Filter{Ifindex: ifindex, Parent: ParentIngress, Prio: 10, Protocol: ProtoIPv4, Handle: h, Flags: SkipHW | NotInHW, Key: k,
			Actions: []Action{Drop(MakeCookie(uint64(h)))}}
	}
	v6 := func(h uint32, k Key) Filter {
		k.EthType = ProtoIPv6
		return Filter{Ifindex: ifindex, Parent: ParentIngress, Prio: 20, Protocol: ProtoIPv6, Handle: h, Flags: SkipHW | NotInHW, Key: k,
			Actions: []Action{Drop(MakeCookie(uint64(h)))}}
	}
	dscp := Key{IPProto: IPProtoUDP, Dst: pfx("203.0.113.0/24")}
	dscp.DSCP(46)
	return []Filter{
		v4(1, Key{IPProto: IPProtoTCP, Src: pfx("10.1.0.0/16"),
			Dst:     AddrMask{Addr: netip.MustParseAddr("192.0.0.7"), Mask: netip.MustParseAddr("255.255.0.255")},
			SrcPort: PortMask{Port: 0x400, Mask: 0xfc00}, DstPort: PortMask{Port: 80, Mask: 0xffff},
			TCPFlags: 0x02, TCPFlagsMask: 0x12}),
		v4(2, Key{IPProto: IPProtoUDP, DstPort: PortMask{Port: 53, Mask: 0xffff}}),
		v4(3, Key{IPProto: IPProtoICMP, ICMPType: 8, ICMPTypeMask: 0xff, ICMPCode: 0, ICMPCodeMask: 0xff}),
		v4(4, Key{IPFlags: IPFlagFrag, IPFlagsMask: IPFlagFrag | IPFlagFirstFrag}),
		v4(5, dscp),
		v6(6, Key{IPProto: IPProtoUDP, Dst: pfx("2001:db8:1::/48"), SrcPort: PortMask{Port: 0x1000, Mask: 0xf000}}),
		v6(7, Key{IPProto: IPProtoICMPv6, Src: pfx("2001:db8::1/128"), ICMPType: 128, ICMPTypeMask: 0xff}),
		v6(8, Key{TOS: 0xb8, TOSMask: 0xfc}),
		{Ifindex: ifindex, Parent: ParentIngress, Prio: 30, Protocol: Proto8021Q, Handle: 9, Flags: SkipHW | NotInHW,
			Key: Key{EthType: Proto8021Q, VLAN: VLANKey{ID: 100, HasID: true, Prio: 3, HasPrio: true, EthType: ProtoIPv4},
				IPProto: IPProtoTCP, Dst: pfx("198.51.100.0/24")},
			Actions: []Action{Drop(MakeCookie(9))}},
	}
}

func stripKernel(fs []Filter) []Filter {
	out := make([]Filter, len(fs))
	for i, f := range fs {
		acts := make([]Action, len(f.Actions))
		for j, a := range f.Actions {
			a.Index, a.Stats, a.Times = 0, Stats{}, Times{}
			acts[j] = a
		}
		f.Actions = acts
		out[i] = f
	}
	return out
}

func TestReplayKernelDump(t *testing.T) {
	got, err := replayClient(t, "dump-lab").Dump(DumpQuery{Ifindex: 3, AllChain: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(capturedLab(), stripKernel(got), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Fatalf("decoded 6.1 dump differs (-installed +decoded):\n%s", diff)
	}
	for _, f := range got {
		a := f.Actions[0]
		if !a.Stats.Present || a.Index == 0 || a.Verdict != ActShot || f.InHWCount != 0 {
			t.Fatalf("%s: action %+v in_hw_count %d", f.ID(), a, f.InHWCount)
		}
	}
}

func TestReplayKernelEcho(t *testing.T) {
	want := capturedLab()[0]
	req := want
	req.Parent, req.Flags = 0, SkipHW
	got, err := replayClient(t, "install-echo").Add(req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(stripKernel([]Filter{want}), stripKernel([]Filter{got}), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Fatalf("echo (-want +got):\n%s", diff)
	}
}

func TestReplayKernelErrors(t *testing.T) {
	f := capturedLab()[0]
	f.Parent, f.Flags = 0, SkipHW
	_, err := replayClient(t, "install-eexist").Add(f)
	var ne *nlerr.Error
	if !errors.As(err, &ne) || !nlerr.IsExists(err) || ne.Errno != unix.EEXIST {
		t.Fatalf("EEXIST replay: %v", err)
	}
	t.Logf("6.1 EEXIST: %v", err)

	g := capturedLab()[1]
	g.Parent, g.Flags = 0, SkipSW
	_, err = replayClient(t, "netdevsim-skipsw").Add(g)
	if !errors.As(err, &ne) || ne.Errno != unix.EOPNOTSUPP || ne.Extack != "netdevsim: only offload of BPF classifiers supported" || !nlerr.IsUnsupported(err) {
		t.Fatalf("netdevsim skip_sw replay: %#v", err)
	}

	d := capturedLab()[1]
	d.Parent, d.Flags, d.Handle, d.Ifindex = 0, SkipHW, 2, 14
	_, err = replayClient(t, "install-enodev").Add(d)
	if !errors.As(err, &ne) || ne.Errno != unix.ENODEV || !nlerr.IsDeviceGone(err) {
		t.Fatalf("deleted-device replay: %#v", err)
	}

	v := capturedLab()[3]
	v.Parent, v.Flags = 0, Verbose
	r := replayClient(t, "netdevsim-verbose-warning").Batch([]Op{{Kind: OpAdd, Filter: v}}, BatchOptions{})[0]
	if r.Err != nil || r.Warning != "netdevsim: only offload of BPF classifiers supported" {
		t.Fatalf("verbose warning replay: %+v", r)
	}
}
