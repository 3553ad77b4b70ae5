//go:build linux

package xdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// lab is a veth topology in two network namespaces:
//
//	ns A: va (sender)   <-> ns B: vb (engine under test)
//	ns A: vd (far side) <-> ns B: vc (inline egress)
type lab struct {
	nsA, nsB string
	va, vb   int // ifindexes
	vc, vd   int
	vbMAC    net.HardwareAddr
	fdA, fdB int
	origNS   int
}

func sh(t testing.TB, args ...string) {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newLab builds the topology, skipping only when there is really no way to.
func newLab(t testing.TB) *lab {
	t.Helper()
	needBPF(t)
	if _, err := exec.LookPath("ip"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but iproute2 (ip) is missing")
		}
		t.Skip("needs iproute2's ip to build the veth namespaces")
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but no network namespace support")
		}
		t.Skip("no network namespace support: " + err.Error())
	}
	id := fmt.Sprintf("%d", os.Getpid()%100000)
	l := &lab{nsA: "sxa" + id, nsB: "sxb" + id}
	t.Cleanup(func() { l.close() })
	sh(t, "ip", "netns", "add", l.nsA)
	sh(t, "ip", "netns", "add", l.nsB)
	for _, ns := range []string{l.nsA, l.nsB} {
		// No IPv6 autoconfiguration: the stack's own frames (ND, MLD)
		// would mix with the test's.
		sh(t, "ip", "netns", "exec", ns, "sh", "-c",
			"echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6")
	}
	sh(t, "ip", "link", "add", "sxva"+id, "numtxqueues", "2", "numrxqueues", "2", "type", "veth", "peer", "name", "sxvb"+id, "numtxqueues", "2", "numrxqueues", "2")
	sh(t, "ip", "link", "add", "sxvc"+id, "type", "veth", "peer", "name", "sxvd"+id)
	sh(t, "ip", "link", "set", "sxva"+id, "netns", l.nsA)
	sh(t, "ip", "link", "set", "sxvd"+id, "netns", l.nsA)
	sh(t, "ip", "link", "set", "sxvb"+id, "netns", l.nsB)
	sh(t, "ip", "link", "set", "sxvc"+id, "netns", l.nsB)
	for _, c := range [][]string{{l.nsA, "sxva" + id}, {l.nsA, "sxvd" + id}, {l.nsB, "sxvb" + id}, {l.nsB, "sxvc" + id}, {l.nsA, "lo"}, {l.nsB, "lo"}} {
		sh(t, "ip", "-n", c[0], "link", "set", c[1], "up")
	}
	var err error
	if l.origNS, err = unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		t.Fatal(err)
	}
	if l.fdA, err = unix.Open("/run/netns/"+l.nsA, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		t.Fatal(err)
	}
	if l.fdB, err = unix.Open("/run/netns/"+l.nsB, unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		t.Fatal(err)
	}
	l.in(t, l.fdA, func() {
		l.va = ifindex(t, "sxva"+id)
		l.vd = ifindex(t, "sxvd"+id)
	})
	l.in(t, l.fdB, func() {
		l.vb = ifindex(t, "sxvb"+id)
		l.vc = ifindex(t, "sxvc"+id)
		ifc, err := net.InterfaceByIndex(l.vb)
		if err != nil {
			t.Fatal(err)
		}
		l.vbMAC = ifc.HardwareAddr
	})
	return l
}

func ifindex(t testing.TB, name string) int {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return ifc.Index
}

// in runs f on a thread inside the namespace fd.
func (l *lab) in(t testing.TB, fd int, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := unix.Setns(l.origNS, unix.CLONE_NEWNET); err != nil {
			panic(err) // the thread is locked; leaving it in the wrong namespace would poison others
		}
	}()
	f()
}

func (l *lab) close() {
	for _, fd := range []int{l.fdA, l.fdB, l.origNS} {
		if fd > 0 {
			unix.Close(fd)
		}
	}
	exec.Command("ip", "netns", "del", l.nsA).Run()
	exec.Command("ip", "netns", "del", l.nsB).Run()
}

// xdpMd is struct xdp_md (cilium/ebpf's own copy is internal).
type xdpMd struct{ Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32 }

// liveGen is the in-kernel generator: BPF_PROG_RUN with live frames runs an
// XDP_TX program, so each frame leaves through the ingress interface (va)
// and reaches vb's XDP without any skb.
//
// Some kernels refuse live frames to a process that may otherwise run BPF:
// BPF_PROG_RUN answers EPERM (seen on a 6.18 VM kernel, as root but without
// CAP_SYS_RESOURCE in the bounding set). There the generator sends the same
// stream through an AF_PACKET socket on the same interface instead
// (packet(7), PACKET_QDISC_BYPASS): each frame then reaches vb's XDP as an
// skb, which veth's XDP receive path (drivers/net/veth.c, veth_xdp_rcv_skb)
// turns into an xdp_buff for the same program. The frames, their order and
// their counts are the same, so every assertion on the far side stands;
// only the sender's own cost differs, and the generator logs which sender
// ran.
type liveGen struct {
	prog *ebpf.Program
	// ring, where set, is the ring prog walks (a ring program rewrites
	// each frame to the ring's next); the packet-socket sender walks it
	// too, from the same counter, so ring.reset starts either sender over.
	ring *ring
	sent atomic.Uint64 // frames sent
	// refused is set once the kernel refused live frames; every later send
	// goes through the packet socket.
	refused atomic.Bool
}

func newLiveGen(t testing.TB) *liveGen {
	t.Helper()
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 3 /* XDP_TX */), asm.Return()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return newGen(t, p, nil)
}

// newGen returns the generator of prog, an XDP_TX program (with r, the
// ring program of r), which says at the end of the test or benchmark if
// it had to send through the packet socket.
func newGen(tb testing.TB, prog *ebpf.Program, r *ring) *liveGen {
	g := &liveGen{prog: prog, ring: r}
	tb.Cleanup(func() {
		if g.refused.Load() {
			tb.Logf("the kernel refused live frames (BPF_PROG_RUN: EPERM): %d frames went through an AF_PACKET socket instead", g.sent.Load())
		}
	})
	return g
}

// send transmits frame repeat times out of ifindex; the calling thread must
// be in that interface's namespace.
func (g *liveGen) send(ifindex int, frame []byte, repeat uint32) error {
	if !g.refused.Load() {
		_, err := g.prog.Run(&ebpf.RunOptions{Data: frame, Repeat: repeat, BatchSize: 64,
			Flags: unix.BPF_F_TEST_XDP_LIVE_FRAMES, Context: &xdpMd{DataEnd: uint32(len(frame)), IngressIfindex: uint32(ifindex)}})
		if err == nil {
			g.sent.Add(uint64(repeat))
			return nil
		}
		if !errors.Is(err, unix.EPERM) || g.sent.Load() > 0 {
			return err
		}
		g.refused.Store(true)
	}
	return g.sendPacket(ifindex, frame, repeat)
}

// sendPacket is send through an AF_PACKET socket, one frame a sendto(2).
func (g *liveGen) sendPacket(ifindex int, frame []byte, repeat uint32) error {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0) // protocol 0: receives nothing
	if err != nil {
		return fmt.Errorf("packet socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
		return fmt.Errorf("PACKET_QDISC_BYPASS: %w", err)
	}
	var pos uint64 // the ring's counter, as the ring program reads it
	if g.ring != nil {
		if err := g.ring.ctr.Lookup(uint32(0), &pos); err != nil {
			return fmt.Errorf("ring counter: %w", err)
		}
	}
	sa := &unix.SockaddrLinklayer{Ifindex: ifindex}
	for range repeat {
		f := frame
		if g.ring != nil {
			f = g.ring.list[pos&uint64(g.ring.n-1)]
			pos++
		}
		// sll_protocol is the frame's EtherType as it sits in the frame
		// (network order), which the kernel takes for skb->protocol.
		sa.Protocol = binary.NativeEndian.Uint16(f[12:14])
		for {
			err = unix.Sendto(fd, f, 0, sa)
			if !errors.Is(err, unix.ENOBUFS) && !errors.Is(err, unix.EAGAIN) {
				break
			}
			runtime.Gosched()
		}
		if err != nil {
			return fmt.Errorf("sendto ifindex %d: %w", ifindex, err)
		}
		g.sent.Add(1)
	}
	if g.ring != nil {
		if err := g.ring.ctr.Put(uint32(0), pos); err != nil {
			return fmt.Errorf("ring counter: %w", err)
		}
	}
	return nil
}

// tagLen is the fixed length of lab frames; the tag sits in the last 4 bytes.
const tagLen = 256

func tagged(b []byte, tag uint32, dst net.HardwareAddr) []byte {
	out := make([]byte, tagLen)
	copy(out, b)
	copy(out[0:6], dst)
	binary.BigEndian.PutUint32(out[tagLen-4:], tag)
	return out
}

// farSide counts frames by tag (per-CPU), then drops them: an XDP program
// on vd (what inline mode redirected) or a tcx program on vb (what host mode
// passed to the stack).
type farSide struct {
	counts *ebpf.Map
	prog   *ebpf.Program
	link   link.Link
	ntags  int
}

// tagCounter builds a program of type typ (XDP or a tc classifier) that
// counts frames by tag in counts and then drops them.
func tagCounter(t testing.TB, typ ebpf.ProgramType, counts *ebpf.Map) *ebpf.Program {
	t.Helper()
	R0, R1, R2, R3, R4, R6, FP := asm.R0, asm.R1, asm.R2, asm.R3, asm.R4, asm.R6, asm.RFP
	// The tag, big-endian, into FP-4.
	load := asm.Instructions{
		asm.LoadMem(R2, R1, 0, asm.Word), // xdp_md.data
		asm.LoadMem(R3, R1, 4, asm.Word), // xdp_md.data_end
		asm.Mov.Reg(R4, R2),
		asm.Add.Imm(R4, tagLen),
		asm.JGT.Reg(R4, R3, "out"),
		asm.LoadMem(R6, R2, tagLen-4, asm.Word),
		asm.StoreMem(FP, -4, R6, asm.Word),
	}
	drop := int32(XDPDrop)
	if typ == ebpf.SchedCLS {
		// The stack may have taken a VLAN tag out of the data into the
		// skb's metadata: the tag is the last 4 bytes, wherever they are.
		load = asm.Instructions{
			asm.LoadMem(R2, R1, 0, asm.Word), // __sk_buff.len
			asm.Add.Imm(R2, -4),
			asm.Mov.Reg(R3, FP),
			asm.Add.Imm(R3, -4),
			asm.Mov.Imm(R4, 4),
			asm.FnSkbLoadBytes.Call(),
			asm.JNE.Imm(R0, 0, "out"),
		}
		drop = 2 // TC_ACT_SHOT
	}
	insns := append(load,
		asm.LoadMem(R6, FP, -4, asm.Word),
		asm.HostTo(asm.BE, R6, asm.Word),
		asm.StoreMem(FP, -4, R6, asm.Word),
	)
	insns = append(insns, countAt(counts, -4, "out")...)
	insns = append(insns,
		asm.Mov.Imm(R0, drop).WithSymbol("out"),
		asm.Return(),
	)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: typ, License: "GPL", Instructions: insns})
	if err != nil {
		t.Fatal(err)
	}
	return prog
}

func newFarSide(t testing.TB, l *lab, ntags int) *farSide { return newTagSide(t, l, ntags, false) }

// newStackSide counts by tag the frames the engine on vb passed to the
// stack: a tcx ingress program on vb (Linux 6.6), which runs on the skb
// built after XDP_PASS, then drops them.
func newStackSide(t testing.TB, l *lab, ntags int) *farSide { return newTagSide(t, l, ntags, true) }

func newTagSide(t testing.TB, l *lab, ntags int, stack bool) *farSide {
	t.Helper()
	counts, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: uint32(ntags)})
	if err != nil {
		t.Fatal(err)
	}
	typ, ns := ebpf.XDP, l.fdA
	if stack {
		typ, ns = ebpf.SchedCLS, l.fdB
	}
	prog := tagCounter(t, typ, counts)
	fs := &farSide{counts: counts, prog: prog, ntags: ntags}
	l.in(t, ns, func() {
		if stack {
			fs.link, err = link.AttachTCX(link.TCXOptions{Program: prog, Attach: ebpf.AttachTCXIngress, Interface: l.vb})
		} else {
			fs.link, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: l.vd, Flags: link.XDPDriverMode})
		}
	})
	if err != nil {
		prog.Close()
		counts.Close()
		if stack && errors.Is(err, ebpf.ErrNotSupported) && os.Getenv("CI") != "true" {
			t.Skipf("tcx (Linux 6.6) is needed to count what reaches the stack: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.link.Close(); prog.Close(); counts.Close() })
	return fs
}

func (fs *farSide) count(t testing.TB, tag uint32) uint64 {
	t.Helper()
	var per []uint64
	if err := fs.counts.Lookup(tag, &per); err != nil {
		t.Fatal(err)
	}
	var s uint64
	for _, v := range per {
		s += v
	}
	return s
}

// countAt returns the instructions that add one to the 64-bit value that
// counts holds under the key at FP+keyOff, and jump to miss when it holds
// none (bpf_map_lookup_elem returned NULL). They use R0-R5.
func countAt(counts *ebpf.Map, keyOff int32, miss string) asm.Instructions {
	R0, R1, R2 := asm.R0, asm.R1, asm.R2
	return asm.Instructions{
		asm.LoadMapPtr(R1, counts.FD()),
		asm.Mov.Reg(R2, asm.RFP),
		asm.Add.Imm(R2, keyOff),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(R0, 0, miss),
		asm.LoadMem(R1, R0, 0, asm.DWord),
		asm.Add.Imm(R1, 1),
		asm.StoreMem(R0, 0, R1, asm.DWord),
	}
}
