package tcflower

import (
	"encoding/binary"
	"errors"
	"iter"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/netlink"
	"github.com/mdlayher/netlink/nltest"
	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/offload/nlerr"
)

// fakeKernel is a netlink.Socket that, like the kernel, answers every
// request of a sendmsg and queues each answer as its own datagram.
type fakeKernel struct {
	datagrams
	handle func(req netlink.Message) []netlink.Message
	sends  int // sendmsg calls
	reqs   []netlink.Message
}

func (k *fakeKernel) Close() error { return nil }
func (k *fakeKernel) Send(m netlink.Message) error {
	return k.SendMessages([]netlink.Message{m})
}
func (k *fakeKernel) SendMessages(ms []netlink.Message) error {
	k.sends++
	for _, m := range ms {
		k.reqs = append(k.reqs, m)
		for _, r := range k.handle(m) {
			// Like netlink_rcv_skb: no reply to a successful request that
			// did not ask for an ACK.
			if r.Header.Type == netlink.Error && m.Header.Flags&netlink.Acknowledge == 0 && len(r.Data) >= 4 && binary.NativeEndian.Uint32(r.Data) == 0 {
				continue
			}
			r.Header.Sequence = m.Header.Sequence
			r.Header.PID = nltest.PID
			if r.Header.Length == 0 {
				r.Header.Length = uint32(16 + len(r.Data))
			}
			k.queue = append(k.queue, []netlink.Message{r})
		}
	}
	return nil
}

// datagrams is the receive side of the fake sockets: answers queued as
// datagrams, handed out one per Receive. Receiving with nothing queued is an
// error (a real socket would block).
type datagrams struct {
	queue [][]netlink.Message
}

func (d *datagrams) Receive() ([]netlink.Message, error) {
	if len(d.queue) == 0 {
		return nil, errors.New("fake socket: receive with nothing queued (would block)")
	}
	m := d.queue[0]
	d.queue = d.queue[1:]
	return m, nil
}

func (d *datagrams) ReceiveIter() iter.Seq2[netlink.Message, error] {
	return func(yield func(netlink.Message, error) bool) {
		ms, err := d.Receive()
		if err != nil {
			yield(netlink.Message{}, err)
			return
		}
		for _, m := range ms {
			if !yield(m, nil) {
				return
			}
		}
	}
}

// ack builds the kernel's reply to req: errno (0 = success) and, like
// netlink_ack without NETLINK_CAP_ACK, the whole request for errors, then
// the extack TLVs.
func ack(req netlink.Message, errno unix.Errno, msg string, offset uint32) netlink.Message {
	hdr, _ := req.MarshalBinary()
	data := binary.NativeEndian.AppendUint32(nil, uint32(-int32(errno)))
	flags := netlink.HeaderFlags(0)
	if errno == 0 {
		data = append(data, hdr[:16]...)
		flags |= netlink.Capped
	} else {
		data = append(data, hdr...)
	}
	if msg != "" || offset != 0 {
		flags |= netlink.AcknowledgeTLVs
		ae := netlink.NewAttributeEncoder()
		if msg != "" {
			ae.String(1, msg)
		}
		if offset != 0 {
			ae.Uint32(2, offset)
		}
		tlv, _ := ae.Encode()
		data = append(data, tlv...)
	}
	return netlink.Message{Header: netlink.Header{Type: netlink.Error, Flags: flags}, Data: data}
}

func TestBatchPerOpResults(t *testing.T) {
	fk := &fakeKernel{}
	var handle uint32 = 100
	fk.handle = func(req netlink.Message) []netlink.Message {
		var f Filter
		switch req.Header.Type {
		case rtmNewFilter:
			if err := f.UnmarshalBinary(req.Data); err != nil {
				t.Errorf("kernel could not decode request: %v", err)
				return []netlink.Message{ack(req, unix.EINVAL, "bad", 0)}
			}
			switch f.Prio {
			case 2:
				return []netlink.Message{ack(req, unix.EOPNOTSUPP, "netdevsim: only offload of BPF classifiers supported", 0)}
			case 3:
				return []netlink.Message{ack(req, unix.ENOSPC, "", 0)}
			}
			handle++
			f.Handle = handle
			f.Flags |= NotInHW
			echo, _ := f.MarshalBinary()
			out := []netlink.Message{}
			if req.Header.Flags&netlink.Echo != 0 {
				out = append(out, netlink.Message{Header: netlink.Header{Type: rtmNewFilter}, Data: echo})
			}
			return append(out, ack(req, 0, "", 0))
		case rtmDelFilter:
			return []netlink.Message{ack(req, unix.ENOENT, "Filter with specified priority/protocol not found", 0)}
		}
		return []netlink.Message{ack(req, unix.EOPNOTSUPP, "", 0)}
	}
	c := NewClient(netlink.NewConn(fk, nltest.PID))
	mk := func(prio uint16) Filter {
		return Filter{Ifindex: 99999, Prio: prio, Protocol: ProtoIPv4, Flags: SkipHW,
			Key: Key{EthType: ProtoIPv4, IPProto: IPProtoUDP, DstPort: PortMask{53, 0xffff}}, Actions: []Action{Drop(MakeCookie(uint64(prio)))}}
	}
	bad := mk(5)
	bad.Key.IPProto = 0 // ports without proto: refused before sending
	ops := []Op{
		{OpAdd, mk(1)}, {OpAdd, mk(2)}, {OpReplace, mk(3)}, {OpAdd, bad}, {OpDelete, mk(4)}, {OpAdd, mk(6)},
	}
	res := c.Batch(ops, BatchOptions{Echo: true, Window: 4})
	if fk.sends != 2 {
		t.Fatalf("sendmsg calls = %d, want 2 (window 4, one op invalid)", fk.sends)
	}
	if len(fk.reqs) != 5 {
		t.Fatalf("kernel saw %d requests, want 5", len(fk.reqs))
	}
	// Only the last request of each window asks for an ACK.
	wantFlags := []netlink.HeaderFlags{
		netlink.Request | netlink.Create | netlink.Excl | netlink.Echo,
		netlink.Request | netlink.Create | netlink.Excl | netlink.Echo,
		netlink.Request | netlink.Acknowledge | netlink.Create | netlink.Echo,
		netlink.Request,
		netlink.Request | netlink.Acknowledge | netlink.Create | netlink.Excl | netlink.Echo,
	}
	for i, r := range fk.reqs {
		if r.Header.Flags != wantFlags[i] {
			t.Errorf("request %d flags %v, want %v", i, r.Header.Flags, wantFlags[i])
		}
	}
	if res[0].Err != nil || res[0].Filter.Handle != 101 || res[0].Filter.Flags != SkipHW|NotInHW {
		t.Fatalf("op0: %+v", res[0])
	}
	if id, ok := res[0].Filter.OwnedID(); !ok || id != 1 {
		t.Fatal("op0 echo lost the cookie")
	}
	var ne *nlerr.Error
	if !errors.As(res[1].Err, &ne) || !nlerr.IsUnsupported(res[1].Err) || ne.Extack != "netdevsim: only offload of BPF classifiers supported" ||
		ne.Op != "install" || ne.Dev != "ifindex 99999" || ne.Rule != "chain 0 prio 2 handle 0x0" {
		t.Fatalf("op1: %#v", res[1].Err)
	}
	if !nlerr.IsNoSpace(res[2].Err) || !errors.As(res[2].Err, &ne) || ne.Op != "replace" {
		t.Fatalf("op2: %v", res[2].Err)
	}
	var ve *ValidationError
	if !errors.As(res[3].Err, &ve) || ve.Field != "dst_port" {
		t.Fatalf("op3: %v", res[3].Err)
	}
	if !nlerr.IsNotFound(res[4].Err) {
		t.Fatalf("op4: %v", res[4].Err)
	}
	if res[5].Err != nil || res[5].Filter.Handle != 102 {
		t.Fatalf("op5: %+v", res[5])
	}
}

func TestAckWarning(t *testing.T) {
	fk := &fakeKernel{handle: func(req netlink.Message) []netlink.Message {
		return []netlink.Message{ack(req, 0, "cls_flower: Failed to setup flow action", 0)}
	}}
	c := NewClient(netlink.NewConn(fk, nltest.PID))
	f := Filter{Ifindex: 1, Prio: 1, Protocol: ProtoIPv4, Flags: Verbose, Key: Key{EthType: ProtoIPv4}, Actions: []Action{Drop(nil)}}
	r := c.Batch([]Op{{OpAdd, f}}, BatchOptions{})[0]
	if r.Err != nil || r.Warning != "cls_flower: Failed to setup flow action" {
		t.Fatalf("%+v", r)
	}
}

// dumpReply builds a kernel-style dump message for f with action stats.
func dumpReply(t testing.TB, f Filter, st Stats) netlink.Message {
	t.Helper()
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Actions) == 0 {
		return netlink.Message{Header: netlink.Header{Type: rtmNewFilter}, Data: b}
	}
	// Rebuild options adding TCA_FLOWER_IN_HW_COUNT and action stats the
	// way fl_dump does.
	opts, _ := f.marshalOptions()
	attrs, _ := netlink.UnmarshalAttributes(opts)
	var out []netlink.Attribute
	for _, a := range attrs {
		if a.Type&^netlink.Nested != flowerAct {
			out = append(out, a)
		}
	}
	out = append(out, netlink.Attribute{Type: flowerInHWCount, Data: u32ne(f.InHWCount)})
	basic := func(by, pk uint64) []byte {
		b := make([]byte, 16)
		binary.NativeEndian.PutUint64(b, by)
		binary.NativeEndian.PutUint32(b[8:], uint32(pk))
		return b
	}
	queue := make([]byte, 20)
	binary.NativeEndian.PutUint32(queue[8:], uint32(st.Drops))
	stats := []netlink.Attribute{
		{Type: statsBasic, Data: basic(st.Bytes, st.Packets)},
		{Type: statsBasicHW, Data: basic(st.HWBytes, st.HWPackets)},
		{Type: statsQueue, Data: queue},
	}
	if st.Packets > 0xffffffff {
		stats = append(stats[:1], append([]netlink.Attribute{{Type: statsPkt64, Data: binary.NativeEndian.AppendUint64(nil, st.Packets)}}, stats[1:]...)...)
	}
	tm := make([]byte, 32)
	binary.NativeEndian.PutUint64(tm[8:], 250) // lastuse 2.5 s ago
	act := []netlink.Attribute{
		{Type: actKind, Data: []byte("gact\x00")},
		{Type: actStats | netlink.Nested, Data: mustAttrs(t, stats)},
		{Type: actCookie, Data: f.Actions[0].Cookie},
		{Type: actOptions | netlink.Nested, Data: mustAttrs(t, []netlink.Attribute{
			{Type: gactTM, Data: tm},
			{Type: gactParms, Data: gactParmsBytes(f.Actions[0].Index, f.Actions[0].Verdict)},
		})},
	}
	out = append(out, netlink.Attribute{Type: flowerAct | netlink.Nested, Data: mustAttrs(t, []netlink.Attribute{
		{Type: 1 | netlink.Nested, Data: mustAttrs(t, act)},
	})})
	top := []netlink.Attribute{
		{Type: tcaKind, Data: []byte("flower\x00")},
		{Type: tcaChain, Data: u32ne(f.Chain)},
		{Type: tcaOptions | netlink.Nested, Data: mustAttrs(t, out)},
	}
	return netlink.Message{Header: netlink.Header{Type: rtmNewFilter}, Data: append(f.header().append(nil), mustAttrs(t, top)...)}
}

func TestDumpDecodesStatsAndSkipsForeign(t *testing.T) {
	f1 := Filter{Ifindex: 4, Parent: ParentIngress, Chain: 0, Prio: 7, Protocol: ProtoIPv4, Handle: 1, Flags: SkipHW | NotInHW,
		Key:     Key{EthType: ProtoIPv4, IPProto: IPProtoUDP, Dst: Prefix(netip.MustParsePrefix("198.51.100.0/24")), DstPort: PortMask{53, 0xffff}},
		Actions: []Action{{Kind: "gact", Verdict: ActShot, Index: 3, Cookie: MakeCookie(77)}}}
	f2 := Filter{Ifindex: 4, Parent: ParentIngress, Chain: 0, Prio: 7, Protocol: ProtoIPv4, Handle: 2, Flags: InHW, InHWCount: 1,
		Key: Key{EthType: ProtoIPv4, IPProto: IPProtoTCP}, Actions: []Action{{Kind: "gact", Verdict: ActShot, Index: 4, Cookie: []byte("foreign")}}}
	matchall := func() netlink.Message {
		ae := netlink.NewAttributeEncoder()
		ae.String(tcaKind, "matchall")
		a, _ := ae.Encode()
		return netlink.Message{Header: netlink.Header{Type: rtmNewFilter}, Data: append(tcmsg{Ifindex: 4, Handle: 1, Parent: ParentIngress, Info: 1 << 16}.append(nil), a...)}
	}
	head := Filter{Ifindex: 4, Prio: 7, Protocol: ProtoIPv4} // chain head: handle 0, no options
	fn := nltest.CheckRequest([]netlink.HeaderType{rtmGetFilter}, []netlink.HeaderFlags{netlink.Request | netlink.Dump},
		func(req []netlink.Message) ([]netlink.Message, error) {
			h, err := parseTcmsg(req[0].Data)
			if err != nil || h.Ifindex != 4 || h.Parent != ParentIngress || h.Info != 7<<16|uint32(htons(ProtoIPv4)) {
				t.Errorf("dump request tcmsg %+v (%v)", h, err)
			}
			attrs, _ := netlink.UnmarshalAttributes(req[0].Data[tcmsgLen:])
			want := []netlink.Attribute{{Type: tcaChain, Data: u32ne(0)}, {Type: tcaDumpFlags, Data: append(u32ne(1), u32ne(1)...)}}
			if diff := cmp.Diff(want, attrs, ignoreLen); diff != "" {
				t.Errorf("dump attrs (-want +got):\n%s", diff)
			}
			msgs := []netlink.Message{
				dumpReply(t, head, Stats{}),
				dumpReply(t, f1, Stats{Bytes: 1000, Packets: 0x1_0000_0005, Drops: 5}),
				matchall(),
				dumpReply(t, f2, Stats{Bytes: 500, Packets: 9, HWBytes: 300, HWPackets: 6, Drops: 9}),
				{Header: netlink.Header{Type: netlink.Done}},
			}
			for i := range msgs {
				msgs[i].Header.Sequence, msgs[i].Header.PID = req[0].Header.Sequence, nltest.PID
			}
			return nltest.Multipart(msgs)
		})
	c := NewClient(nltest.Dial(fn))
	got, err := c.Dump(DumpQuery{Ifindex: 4, Prio: 7, Protocol: ProtoIPv4, Terse: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d filters, want 2: %+v", len(got), got)
	}
	if got[0].Handle != 1 || got[0].Flags != SkipHW|NotInHW || got[1].InHWCount != 1 || got[1].Flags != InHW {
		t.Fatalf("flags/handles: %+v", got)
	}
	s0, s1 := got[0].Actions[0].Stats, got[1].Actions[0].Stats
	if s0 != (Stats{Bytes: 1000, Packets: 0x1_0000_0005, Drops: 5, Present: true}) {
		t.Fatalf("stats0 %+v", s0)
	}
	if s1.SWPackets() != 3 || s1.SWBytes() != 200 || s1.HWPackets != 6 {
		t.Fatalf("stats1 %+v", s1)
	}
	if got[0].Actions[0].Times.LastUse != 250 || got[0].Actions[0].Index != 3 {
		t.Fatalf("times/index %+v", got[0].Actions[0])
	}
	if id, ok := got[0].OwnedID(); !ok || id != 77 {
		t.Fatal("own cookie not recognised")
	}
	if _, ok := got[1].OwnedID(); ok {
		t.Fatal("foreign cookie taken as ours")
	}
	if diff := cmp.Diff(f1.Key, got[0].Key, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Fatalf("key: %s", diff)
	}
}
