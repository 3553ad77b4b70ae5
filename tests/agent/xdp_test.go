//go:build linux

package agent_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/agent/backend"
	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/daemon"
	"github.com/scrubd/scrubd/agent/placement"
)

// netnsPair is two network namespaces joined by a veth pair: frames sent
// on a (in A) arrive on b (in B).
type netnsPair struct {
	a, b       string // namespace names
	ifA, ifB   string // interface names
	fdA, fdB   int
	macA, macB net.HardwareAddr
}

func needRootNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true but not root: the XDP agent test needs root")
	}
	t.Skip("needs root: network namespaces, veth and XDP")
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
}

func newNetnsPair(t *testing.T) *netnsPair {
	t.Helper()
	id := fmt.Sprint(os.Getpid() % 100000)
	p := &netnsPair{a: "sgA" + id, b: "sgB" + id, ifA: "sga" + id, ifB: "sgb" + id}
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", p.a).Run()
		exec.Command("ip", "netns", "del", p.b).Run()
	})
	run(t, "ip", "netns", "add", p.a)
	run(t, "ip", "netns", "add", p.b)
	for _, ns := range []string{p.a, p.b} {
		// No IPv6 autoconfiguration: its frames (DAD, router
		// solicitations) would be counted as passed too.
		run(t, "ip", "netns", "exec", ns, "sh", "-c",
			"echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6")
	}
	run(t, "ip", "link", "add", p.ifA, "netns", p.a, "type", "veth", "peer", "name", p.ifB, "netns", p.b)
	run(t, "ip", "-n", p.a, "link", "set", p.ifA, "up")
	run(t, "ip", "-n", p.b, "link", "set", p.ifB, "up")
	for _, x := range []struct {
		ns  string
		fd  *int
		ifc string
		mac *net.HardwareAddr
	}{{p.a, &p.fdA, p.ifA, &p.macA}, {p.b, &p.fdB, p.ifB, &p.macB}} {
		h, err := netns.GetFromName(x.ns)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		*x.fd = int(h)
		inNetns(t, *x.fd, func() {
			ifc, err := net.InterfaceByName(x.ifc)
			if err != nil {
				t.Fatal(err)
			}
			*x.mac = ifc.HardwareAddr
		})
	}
	return p
}

// inNetns runs f on a locked thread inside the namespace fd
// (vishvananda/netns) and brings the thread back.
func inNetns(t *testing.T, fd int, f func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	if err := netns.Set(netns.NsHandle(fd)); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic(err) // a locked thread left in the wrong namespace would poison others
		}
	}()
	f()
}

// sendUDP sends n IPv4 UDP frames to dport out of the pair's a side, with a
// raw packet socket created in namespace A.
func (p *netnsPair) sendUDP(t *testing.T, dport uint16, n int) {
	t.Helper()
	p.sendUDPVia(t, p.ifA, p.macB, dport, n)
}

// sendUDPVia sends them out of interface ifname of namespace A to dst.
func (p *netnsPair) sendUDPVia(t *testing.T, ifname string, dst net.HardwareAddr, dport uint16, n int) {
	t.Helper()
	inNetns(t, p.fdA, func() {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			t.Fatal(err)
		}
		f := make([]byte, 60)
		copy(f[0:], dst)
		copy(f[6:], ifc.HardwareAddr)
		binary.BigEndian.PutUint16(f[12:], 0x0800)
		ip := f[14:34]
		ip[0], ip[8], ip[9] = 0x45, 64, 17
		binary.BigEndian.PutUint16(ip[2:], 46)
		copy(ip[12:], []byte{198, 51, 100, 7})
		copy(ip[16:], []byte{203, 0, 113, 9})
		binary.BigEndian.PutUint16(f[34:], 4444)
		binary.BigEndian.PutUint16(f[36:], dport)
		binary.BigEndian.PutUint16(f[38:], 26)
		sa := &unix.SockaddrLinklayer{Ifindex: ifc.Index}
		for i := 0; i < n; i++ {
			if err := unix.Sendto(fd, f, 0, sa); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestAgentXDPOnVeth runs the agent with software.engine xdp on a real
// interface (a veth in a namespace) and no hardware offload: its rule file's
// drop rule is enforced by the XDP program, counted per rule in the
// placer's view; the agent stops, the pinned program goes on dropping, and
// a second agent takes the pins over with the counts of both.
func TestAgentXDPOnVeth(t *testing.T) {
	needRootNetns(t)
	p := newNetnsPair(t)
	cfg := testConfig(t, `rules:
- {id: dns-flood, action: drop, match: {proto: udp, dst_port: 53, dst: 203.0.113.0/24}}
`, func(c *config.Config) {
		c.Software = config.Software{Engine: "xdp", Interfaces: []string{p.ifB}, Workers: 1, CyclesPerPacket: 297, XDPPinPath: xdpPin(t)}
	})

	startXDP := func() (*daemon.Daemon, func()) { return startRealAgent(t, &cfg, p) }
	swDrops := func(d *daemon.Daemon) (uint64, placement.Path) {
		for _, r := range d.Placer.View().Rules.All() {
			if r.ID == "dns-flood" {
				return r.SW.Packets, r.Path
			}
		}
		return 0, ""
	}

	d, stop := startXDP()
	waitFor(t, "dns-flood placed in software", func() bool { _, path := swDrops(d); return path == placement.SW })
	p.sendUDP(t, 53, 100) // matches: dropped by XDP
	p.sendUDP(t, 54, 100) // does not: passed to the stack
	// The per-rule counts and the engine's totals are read on the placer's
	// rounds: wait until both have seen all 200 frames.
	waitFor(t, "100 drops counted for dns-flood and 200 frames in the engine's totals", func() bool {
		n, _ := swDrops(d)
		tot := d.Placer.View().SW.Totals()
		return n >= 100 && tot.Dropped+tot.Passed >= 200
	})
	if n, _ := swDrops(d); n != 100 {
		t.Fatalf("dns-flood: %d packets dropped in software, want 100", n)
	}
	tot := d.Placer.View().SW.Totals()
	if tot.Dropped != 100 || tot.Passed != 100 {
		t.Fatalf("engine totals: %d dropped, %d passed; want 100 and 100", tot.Dropped, tot.Passed)
	}

	// The agent stops; the pinned program keeps filtering.
	stop()
	out, err := exec.Command("ip", "-n", p.b, "link", "show", "dev", p.ifB).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), "prog/xdp") {
		t.Fatalf("no XDP program on %s once the agent stopped:\n%s", p.ifB, out)
	}
	p.sendUDP(t, 53, 50)

	d, stop = startXDP()
	defer stop()
	waitFor(t, "the second agent to count all 150 drops", func() bool { n, _ := swDrops(d); return n >= 150 })
	if n, _ := swDrops(d); n != 150 {
		t.Fatalf("dns-flood after the restart: %d packets, want 150 (100 + 50 dropped while no agent ran)", n)
	}
}

// addForward adds a second veth pair, c (in B) to d (in A), for inline
// mode: the engine on b redirects what passes to c, and it arrives on d
// (with GRO on, a veth takes redirected frames without a program of its own).
func (p *netnsPair) addForward(t *testing.T) (c, d string) {
	t.Helper()
	id := fmt.Sprint(os.Getpid() % 100000)
	c, d = "sgc"+id, "sgd"+id
	run(t, "ip", "link", "add", c, "netns", p.b, "type", "veth", "peer", "name", d, "netns", p.a)
	run(t, "ip", "-n", p.b, "link", "set", c, "up")
	run(t, "ip", "-n", p.a, "link", "set", d, "up")
	run(t, "ip", "netns", "exec", p.a, "ethtool", "-K", d, "gro", "on")
	return c, d
}

// udpCounter counts the IPv4 UDP frames to one port that arrive on an
// interface of namespace fd, from a raw packet socket.
type udpCounter struct{ fd int }

func newUDPCounter(t *testing.T, nsfd int, ifname string) *udpCounter {
	t.Helper()
	var u udpCounter
	inNetns(t, nsfd, func() {
		ifc, err := net.InterfaceByName(ifname)
		if err != nil {
			t.Fatal(err)
		}
		all := int(binary.BigEndian.Uint16([]byte{0, 3})) // htons(ETH_P_ALL) on any host
		all = int(uint16(all)<<8 | uint16(all)>>8)
		if u.fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, all); err != nil {
			t.Fatal(err)
		}
		if err := unix.Bind(u.fd, &unix.SockaddrLinklayer{Protocol: uint16(all), Ifindex: ifc.Index}); err != nil {
			t.Fatal(err)
		}
		tv := unix.Timeval{Usec: 200000}
		if err := unix.SetsockoptTimeval(u.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { unix.Close(u.fd) })
	return &u
}

// count reads until the socket has been quiet for its timeout and returns
// how many frames to dport arrived.
func (u *udpCounter) count(dport uint16) int {
	n := 0
	buf := make([]byte, 2048)
	for {
		m, _, err := unix.Recvfrom(u.fd, buf, 0)
		if err != nil {
			return n
		}
		f := buf[:m]
		if m >= 38 && binary.BigEndian.Uint16(f[12:]) == 0x0800 && f[23] == 17 && binary.BigEndian.Uint16(f[36:]) == dport {
			n++
		}
	}
}

// TestAgentXDPInline: with software.forward_to, what the XDP engine passes
// on either of two interfaces goes out of that one interface (XDP_REDIRECT)
// and arrives on its peer, what it drops does not; once the target is gone,
// passed frames go to the stack and are counted as unforwarded.
func TestAgentXDPInline(t *testing.T) {
	needRootNetns(t)
	p := newNetnsPair(t)
	c, d := p.addForward(t)
	// A second ingress interface, e (in A) to f (in B).
	id := fmt.Sprint(os.Getpid() % 100000)
	e, f := "sge"+id, "sgf"+id
	run(t, "ip", "link", "add", e, "netns", p.a, "type", "veth", "peer", "name", f, "netns", p.b)
	run(t, "ip", "-n", p.a, "link", "set", e, "up")
	run(t, "ip", "-n", p.b, "link", "set", f, "up")
	var fMAC net.HardwareAddr
	inNetns(t, p.fdB, func() {
		ifc, err := net.InterfaceByName(f)
		if err != nil {
			t.Fatal(err)
		}
		fMAC = ifc.HardwareAddr
	})
	cfg := testConfig(t, dnsFlood, func(cf *config.Config) {
		cf.Software = config.Software{Engine: "xdp", Interfaces: []string{p.ifB, f}, ForwardTo: c, Workers: 1,
			CyclesPerPacket: 297, XDPPinPath: xdpPin(t)}
	})
	dm, stop := startRealAgent(t, &cfg, p)
	defer stop()
	waitFor(t, "dns-flood placed", func() bool {
		for _, r := range dm.Placer.View().Rules.All() {
			if r.ID == "dns-flood" && r.Path == placement.SW {
				return true
			}
		}
		return false
	})
	far := newUDPCounter(t, p.fdA, d)
	p.sendUDP(t, 53, 40)
	p.sendUDP(t, 54, 40)
	p.sendUDPVia(t, e, fMAC, 54, 20)
	if got := far.count(54); got != 60 {
		t.Fatalf("%d frames to port 54 arrived on %s, want the 60 passed (40 + 20 from the second interface)", got, d)
	}
	if got := far.count(53); got != 0 {
		t.Fatalf("%d frames of the drop rule arrived on %s", got, d)
	}
	waitFor(t, "the engine's counts", func() bool { return dm.Placer.View().SW.Totals().RxPackets >= 100 })
	if tot := dm.Placer.View().SW.Totals(); tot.Dropped != 40 || tot.Passed != 60 || tot.Unforwarded != 0 {
		t.Fatalf("engine totals %+v: want 40 dropped, 60 passed, 0 unforwarded", tot)
	}
	// The forwarding target goes away: passed frames go to the stack and
	// are counted.
	run(t, "ip", "-n", p.b, "link", "del", c)
	p.sendUDP(t, 54, 25)
	waitFor(t, "unforwarded frames counted", func() bool { return dm.Placer.View().SW.Totals().Unforwarded >= 25 })
	if tot := dm.Placer.View().SW.Totals(); tot.Unforwarded != 25 || tot.Passed != 85 {
		t.Fatalf("engine totals %+v: want 25 unforwarded of 85 passed", tot)
	}
}

// startRealAgent runs the agent on cfg with the real dataplane built in
// namespace B, and returns it once ready with its stop function.
func startRealAgent(t *testing.T, cfg *config.Config, p *netnsPair) (*daemon.Daemon, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan *daemon.Daemon, 1)
	go func() {
		done <- daemon.Run(ctx, cfg, daemon.Options{
			Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			// The real dataplane, built in namespace B, where the
			// interfaces are (attaching resolves their indexes there).
			Paths: func(ctx context.Context, c *config.Config) (ps daemon.Paths, err error) {
				inNetns(t, p.fdB, func() { ps, err = backend.Paths(ctx, c) })
				return ps, err
			},
			Ready: func(d *daemon.Daemon) { ready <- d },
		})
	}()
	select {
	case d := <-ready:
		return d, func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	case err := <-done:
		cancel()
		t.Fatalf("daemon: %v", err)
	}
	return nil, nil
}

// TestAgentXDPCost: with software.cycles_per_packet auto, the agent samples
// the XDP program's run time on live traffic (BPF run-time statistics) and
// its capacity model takes that figure.
func TestAgentXDPCost(t *testing.T) {
	needRootNetns(t)
	p := newNetnsPair(t)
	cfg := testConfig(t, dnsFlood, func(c *config.Config) {
		c.Software = config.Software{Engine: "xdp", Interfaces: []string{p.ifB}, Workers: 2, GHz: 2, XDPPinPath: xdpPin(t)}
	})
	d, stop := startRealAgent(t, &cfg, p)
	defer stop()
	if v := d.Placer.View(); v.CyclesPerPacket != 0 || v.SWCapacityPPS != 0 {
		t.Fatalf("before any traffic: %v cycles per packet, capacity %v; want none", v.CyclesPerPacket, v.SWCapacityPPS)
	}
	// Traffic through the first sampling window (1 s after start, 1 s long).
	deadline := time.Now().Add(20 * time.Second)
	for d.Placer.View().MeasuredCyclesPerPacket == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no XDP cost sampled from live traffic")
		}
		p.sendUDP(t, 53, 200)
		time.Sleep(10 * time.Millisecond)
	}
	v := d.Placer.View()
	t.Logf("sampled %.0f cycles per packet at 2 GHz: capacity %.0f pps on 2 workers", v.MeasuredCyclesPerPacket, v.SWCapacityPPS)
	// Between the program's own few ns and what a packet costs the whole
	// receive path on this machine.
	if v.MeasuredCyclesPerPacket < 2 || v.MeasuredCyclesPerPacket > 20000 {
		t.Fatalf("sampled %v cycles per packet: not a plausible program cost", v.MeasuredCyclesPerPacket)
	}
	if v.CyclesPerPacket != v.MeasuredCyclesPerPacket || v.SWCapacityPPS != 2*2e9/v.CyclesPerPacket {
		t.Fatalf("capacity model: %v cycles per packet, %v pps; want the sampled %v and 2 workers x 2 GHz over it",
			v.CyclesPerPacket, v.SWCapacityPPS, v.MeasuredCyclesPerPacket)
	}
}

const dnsFlood = `rules:
- {id: dns-flood, action: drop, match: {dst: 203.0.113.0/24, proto: udp, dst_port: 53}}
`

// xdpPin is a bpffs directory of the test's own, removed at its end.
func xdpPin(t *testing.T) string {
	pin := "/sys/fs/bpf/scrubd-e2e-" + t.Name() + "-" + fmt.Sprint(os.Getpid())
	t.Cleanup(func() { os.RemoveAll(pin) })
	return pin
}
