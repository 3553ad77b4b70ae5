//go:build linux

package xdp

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/swpath/rule"
)

// waitFor polls cond; the deadline only bounds a hung test, it decides
// nothing when the kernel delivers.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func verdictSum(t testing.TB, e *Engine) uint64 {
	t.Helper()
	v, err := e.Verdicts()
	if err != nil {
		t.Fatal(err)
	}
	var s uint64
	for _, c := range v {
		s += c.Packets
	}
	return s
}

func attach(t testing.TB, l *lab, e *Engine) {
	t.Helper()
	var mode AttachMode
	var err error
	l.in(t, l.fdB, func() { mode, err = e.Attach(l.vb, false) })
	if err != nil {
		t.Fatal(err)
	}
	if mode != Native {
		t.Fatalf("attached %s, want native", mode)
	}
}

// TestVethInline sends mixed traffic through a veth pair into the engine in
// inline mode: per-rule counters equal the reference's verdicts on the same
// frames, and exactly the passed frames arrive on the far side (the peer
// port the engine redirects to).
func TestVethInline(t *testing.T) {
	l := newLab(t)
	vethConformance(t, l, Options{Mode: Inline, Peer: l.vc}, func() counter { return newFarSide(t, l, vethFrames) })
}

// TestVethHost is TestVethInline in host mode: exactly the passed frames
// reach the receiving namespace's stack, counted by a tc (tcx) ingress
// program on the engine's own interface, which runs after XDP_PASS.
func TestVethHost(t *testing.T) {
	l := newLab(t)
	vethConformance(t, l, Options{Mode: Host}, func() counter { return newStackSide(t, l, vethFrames) })
}

// counter counts the frames that passed the engine, by tag.
type counter interface {
	count(t testing.TB, tag uint32) uint64
}

const vethFrames = 300

func vethConformance(t *testing.T, l *lab, opts Options, passed func() counter) {
	var e *Engine
	l.in(t, l.fdB, func() { e = newEngine(t, opts) })
	r := rand.New(rand.NewPCG(7, 7))
	var s rule.Set
	for len(s.Rules) < 30 {
		ru := randRule(r, len(s.Rules))
		test := rule.Set{Rules: append(append([]rule.Rule(nil), s.Rules...), ru)}
		if _, err := compile(&test, make([]uint32, len(test.Rules))); err == nil {
			s = test
		}
	}
	if err := e.Replace(&s); err != nil {
		t.Fatal(err)
	}
	attach(t, l, e)
	const repeat = 16
	fs := passed()
	gen := newLiveGen(t)
	want := make([]uint64, len(s.Rules))
	var wantPass uint64
	passTag := make([]bool, vethFrames)
	var frames [][]byte
	for len(frames) < vethFrames {
		f := randFrame(r)
		f.cut = 0
		if f.etherType == 0x8100 { // a bare tag without payload is not a useful lab frame
			continue
		}
		b := f.build()
		if len(b) > tagLen-4 {
			continue
		}
		frames = append(frames, tagged(b, uint32(len(frames)), l.vbMAC))
	}
	for i, b := range frames {
		f := refParse(b)
		d := s.Decide(&f)
		if d >= 0 {
			want[d] += repeat
		}
		if d < 0 || s.Rules[d].Action == rule.Accept {
			passTag[i] = true
			wantPass += repeat
		}
		before := verdictSum(t, e)
		var err error
		l.in(t, l.fdA, func() { err = gen.send(l.va, b, repeat) })
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "frames to reach the engine", func() bool { return verdictSum(t, e) >= before+repeat })
		if got := verdictSum(t, e); got != before+repeat {
			t.Fatalf("frame %d: engine saw %d frames, sent %d", i, got-before, repeat)
		}
	}
	got, err := e.Counters()
	if err != nil {
		t.Fatal(err)
	}
	for i := range s.Rules {
		if got[i].Packets != want[i] {
			t.Errorf("rule %s (%s): %d packets, reference %d", s.Rules[i].ID, s.Rules[i].Match.String(), got[i].Packets, want[i])
		}
	}
	var far uint64
	waitFor(t, "passed frames past the engine", func() bool {
		far = 0
		for i := range frames {
			far += fs.count(t, uint32(i))
		}
		return far >= wantPass
	})
	for i := range frames {
		c := fs.count(t, uint32(i))
		if (passTag[i] && c != repeat) || (!passTag[i] && c != 0) {
			t.Errorf("frame %d (%+v): %d passed the engine, want pass=%v x%d", i, refParse(frames[i]), c, passTag[i], repeat)
		}
	}
	v, _ := e.Verdicts()
	t.Logf("verdicts %v; %d frames passed; rules %d", v, far, len(s.Rules))
}

// swapSets are two rule sets sharing the rule "both"; frame 0 matches it.
func swapSets(t testing.TB) (*rule.Set, *rule.Set, [][]byte) {
	s1 := mustRules(t, `
rules:
- {id: both, priority: 10, action: drop, match: {proto: udp, dst_port: 53}}
- {id: only1, priority: 20, action: drop, match: {proto: udp, dst_port: 1000-2000}}
`)
	s2 := mustRules(t, `
rules:
- {id: allow-other, priority: 5, action: accept, match: {src: 10.9.0.0/16}}
- {id: only2, priority: 3, action: drop, match: {proto: tcp}}
- {id: both, priority: 10, action: drop, match: {proto: udp, dst_port: 53}}
- {id: wide, priority: 50, action: accept, match: {dst: 10.0.0.0/8}}
`)
	a, b := netip.MustParseAddr("10.1.2.3"), netip.MustParseAddr("10.20.0.1")
	fr := []frame{
		{src: a, dst: b, proto: rule.ProtoUDP, sport: 999, dport: 53},   // both sets drop (rule both)
		{src: a, dst: b, proto: rule.ProtoUDP, sport: 999, dport: 9},    // both pass
		{src: a, dst: b, proto: rule.ProtoUDP, sport: 999, dport: 1500}, // s1 drops
	}
	var out [][]byte
	for i := range fr {
		out = append(out, fr[i].build())
	}
	return s1, s2, out
}

// sender sends frames round-robin from ns A until stop; it returns the
// number of frames of each kind it handed to the kernel.
func startSender(t testing.TB, l *lab, gen *liveGen, frames [][]byte) (stop func() []uint64) {
	var quit atomic.Bool
	var wg sync.WaitGroup
	sent := make([]uint64, len(frames))
	errc := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.in(t, l.fdA, func() {
			for !quit.Load() {
				for i, b := range frames {
					if err := gen.send(l.va, b, 2000); err != nil {
						errc <- err
						return
					}
					sent[i] += 2000
				}
			}
		})
	}()
	return func() []uint64 {
		quit.Store(true)
		wg.Wait()
		select {
		case err := <-errc:
			t.Fatal(err)
		default:
		}
		return sent
	}
}

// TestVethSwapUnderLoad swaps rule sets while traffic flows: a frame of the
// rule present in both sets never reaches the far side.
func TestVethSwapUnderLoad(t *testing.T) {
	l := newLab(t)
	var e *Engine
	l.in(t, l.fdB, func() { e = newEngine(t, Options{Mode: Inline, Peer: l.vc}) })
	s1, s2, raw := swapSets(t)
	var frames [][]byte
	for i, b := range raw {
		frames = append(frames, tagged(b, uint32(i), l.vbMAC))
	}
	if err := e.Replace(s1); err != nil {
		t.Fatal(err)
	}
	attach(t, l, e)
	fs := newFarSide(t, l, len(frames))
	gen := newLiveGen(t)
	stop := startSender(t, l, gen, frames)
	const swaps = 200
	for i := 0; i < swaps; i++ {
		s := s1
		if i%2 == 0 {
			s = s2
		}
		if err := e.Replace(s); err != nil {
			stop()
			t.Fatal(err)
		}
	}
	sent := stop()
	total := sent[0] + sent[1] + sent[2]
	var seen uint64
	waitFor(t, "the engine to drain", func() bool {
		n := verdictSum(t, e)
		ok := n == seen
		seen = n
		return ok && n > 0
	})
	t.Logf("sent %v (%d), engine saw %d, %d swaps", sent, total, seen, swaps)
	if leaked := fs.count(t, 0); leaked != 0 {
		t.Fatalf("%d frames of rule 'both' passed during swaps", leaked)
	}
	if fs.count(t, 1) == 0 {
		t.Fatal("no passing frame reached the far side: the test saw no traffic")
	}
	c, err := e.Counters()
	if err != nil {
		t.Fatal(err)
	}
	both := c[e.Set().Index("both")]
	if both.Packets == 0 {
		t.Fatal("rule 'both' counted nothing")
	}
	// The slot of 'both' survived every swap, so its counter holds every
	// frame 0 the engine saw.
	v, _ := e.Verdicts()
	t.Logf("both=%d verdicts=%v far=[%d %d %d]", both.Packets, v, fs.count(t, 0), fs.count(t, 1), fs.count(t, 2))
}

const bpfFSMagic = 0xcafe4a11

// bpffs returns a fresh directory on a bpffs, mounting /sys/fs/bpf if it is
// not mounted yet.
func bpffs(t testing.TB) string {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/bpf", &st); err != nil || st.Type != bpfFSMagic {
		if err := os.MkdirAll("/sys/fs/bpf", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700"); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("mount bpffs: %v", err)
			}
			t.Skipf("cannot mount bpffs at /sys/fs/bpf: %v", err)
		}
	}
	// bpffs refuses names with a dot.
	dir := filepath.Join("/sys/fs/bpf", "scrubd-test-"+filepath.Base(t.Name())+"-"+itoa(os.Getpid()))
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func itoa(i int) string { return strconv.Itoa(i) }

// newEngineIn creates an Engine in namespace B, where the peer's index
// resolves; the caller closes it.
func newEngineIn(t testing.TB, l *lab, opts Options) *Engine {
	t.Helper()
	needBPF(t)
	var e *Engine
	var err error
	l.in(t, l.fdB, func() { e, err = New(opts) })
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// xdpOn reports whether dev (a name in namespace B) has an XDP program.
func xdpOn(t testing.TB, l *lab, dev string) bool {
	t.Helper()
	out, err := exec.Command("ip", "-n", l.nsB, "link", "show", "dev", dev).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return strings.Contains(string(out), "prog/xdp")
}

// TestPinnedRestart: an agent pins its link and maps and dies; traffic keeps
// being filtered by the pinned program; a new agent takes the pins over,
// swaps its own program into the link and replaces the rules, and no frame
// of a drop rule passes at any point.
func TestPinnedRestart(t *testing.T) {
	l := newLab(t)
	pin := bpffs(t)
	s1, _, raw := swapSets(t)
	var frames [][]byte
	for i, b := range raw {
		frames = append(frames, tagged(b, uint32(i), l.vbMAC))
	}
	opts := Options{Mode: Inline, Peer: l.vc, PinPath: pin}
	needBPF(t)
	var e1, e2 *Engine
	var err error
	e1 = newEngineIn(t, l, opts)
	if err := e1.Replace(s1); err != nil {
		t.Fatal(err)
	}
	attach(t, l, e1)
	fs := newFarSide(t, l, len(frames))
	gen := newLiveGen(t)
	stop := startSender(t, l, gen, frames)
	waitFor(t, "traffic", func() bool { return verdictSum(t, e1) > 10000 })
	c1, err := e1.Counters()
	if err != nil {
		t.Fatal(err)
	}
	// The agent dies without detaching: only its fds go.
	if err := e1.Close(); err != nil {
		stop()
		t.Fatal(err)
	}
	l.in(t, l.fdB, func() { e2, err = New(opts) })
	if err != nil {
		stop()
		t.Fatal(err)
	}
	defer e2.Close()
	n0 := verdictSum(t, e2)
	waitFor(t, "filtering to go on with no agent", func() bool { return verdictSum(t, e2) > n0+10000 })
	attach(t, l, e2) // swaps e2's program into the pinned link
	if err := e2.Replace(s1); err != nil {
		stop()
		t.Fatal(err)
	}
	n1 := verdictSum(t, e2)
	waitFor(t, "filtering by the new program", func() bool { return verdictSum(t, e2) > n1+10000 })
	stop()
	if leaked := fs.count(t, 0); leaked != 0 || fs.count(t, 2) != 0 {
		t.Fatalf("frames of drop rules passed across the restart: both=%d only1=%d", leaked, fs.count(t, 2))
	}
	c2, err := e2.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if i := s1.Index("both"); c2[i].Packets <= c1[i].Packets {
		t.Fatalf("rule both: counter %d after restart, %d before: slot not taken over", c2[i].Packets, c1[i].Packets)
	}
	// Clean detach: the link and pins go, the interface has no program.
	if err := e2.Detach(); err != nil {
		t.Fatal(err)
	}
	if err := e2.Unpin(); err != nil {
		t.Fatal(err)
	}
	if xdpOn(t, l, "sxvb"+itoa(os.Getpid()%100000)) {
		t.Fatal("program still attached after Detach")
	}
	ents, _ := os.ReadDir(pin)
	if len(ents) != 0 {
		t.Fatalf("pins left after Unpin: %v", ents)
	}
}

// TestRedirectFailureCounted: in inline mode a passing frame is redirected
// to the peer; once the peer's interface is gone (the kernel empties the
// devmap slot) the frame goes to the local stack instead and is counted as
// a redirect failure, with its bytes, besides its "passed" verdict.
func TestRedirectFailureCounted(t *testing.T) {
	l := newLab(t)
	var e *Engine
	l.in(t, l.fdB, func() { e = newEngine(t, Options{Mode: Inline, Peer: l.vc}) })
	if err := e.Replace(benchRules(5)); err != nil {
		t.Fatal(err)
	}
	pass := benchFrame(l.vbMAC, l.vbMAC, 9)
	drop := benchFrame(l.vbMAC, l.vbMAC, 10004)
	check := func(frame []byte, want uint32, fails uint64) {
		t.Helper()
		act, err := e.Run(frame)
		if err != nil {
			t.Fatal(err)
		}
		if act != want {
			t.Fatalf("action %d, want %d", act, want)
		}
		c, err := e.RedirectFailures()
		if err != nil {
			t.Fatal(err)
		}
		if c.Packets != fails || c.Bytes != fails*uint64(len(pass)) {
			t.Fatalf("redirect failures %+v, want %d packets of %d bytes", c, fails, len(pass))
		}
	}
	check(pass, XDPRedirect, 0)
	check(drop, XDPDrop, 0)
	sh(t, "ip", "-n", l.nsB, "link", "del", "sxvc"+itoa(os.Getpid()%100000))
	check(pass, XDPPass, 1)
	check(drop, XDPDrop, 1) // a drop never tries the peer
	check(pass, XDPPass, 2)
	v, err := e.Verdicts()
	if err != nil {
		t.Fatal(err)
	}
	if v[Passed].Packets != 3 || v[Dropped].Packets != 2 {
		t.Fatalf("verdicts %+v, want 3 passed, 2 dropped", v)
	}
}

// TestAttachTwoInterfaces: one Engine on two interfaces (vb and vc, fed
// from va and vd) enforces the same rules and counters on both; pinned, each
// interface has its own link, and a restarted agent takes both over.
func TestAttachTwoInterfaces(t *testing.T) {
	l := newLab(t)
	pin := bpffs(t)
	s1, _, raw := swapSets(t)
	opts := Options{PinPath: pin}
	needBPF(t)
	var e1, e2 *Engine
	var err error
	e1 = newEngineIn(t, l, opts)
	defer e1.Close()
	if err := e1.Replace(s1); err != nil {
		t.Fatal(err)
	}
	for _, ifi := range []int{l.vb, l.vc} {
		var mode AttachMode
		l.in(t, l.fdB, func() { mode, err = e1.Attach(ifi, false) })
		if err != nil || mode != Native {
			t.Fatalf("attach ifindex %d: %s, %v", ifi, mode, err)
		}
	}
	l.in(t, l.fdB, func() { _, err = e1.Attach(l.vb, false) })
	if err == nil {
		t.Fatal("a second attach to the same interface succeeded")
	}
	gen := newLiveGen(t)
	const repeat = 50
	// raw[0] matches rule "both" (drop); send it through each interface.
	send := func(e *Engine, from int, frame []byte) {
		t.Helper()
		before := verdictSum(t, e)
		l.in(t, l.fdA, func() { err = gen.send(from, frame, repeat) })
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "frames through the interface", func() bool { return verdictSum(t, e) >= before+repeat })
	}
	send(e1, l.va, tagged(raw[0], 0, l.vbMAC))
	l.in(t, l.fdB, func() {
		ifc, err := net.InterfaceByIndex(l.vc)
		if err != nil {
			t.Fatal(err)
		}
		send(e1, l.vd, tagged(raw[0], 0, ifc.HardwareAddr))
	})
	c, err := e1.Counters()
	if err != nil {
		t.Fatal(err)
	}
	if got := c[s1.Index("both")].Packets; got != 2*repeat {
		t.Fatalf("rule both counted %d, want %d (both interfaces)", got, 2*repeat)
	}
	// The agent dies; the next one takes both links over.
	e1.Close()
	e2 = newEngineIn(t, l, opts)
	defer e2.Close()
	for _, ifi := range []int{l.vb, l.vc} {
		var mode AttachMode
		l.in(t, l.fdB, func() { mode, err = e2.Attach(ifi, false) })
		if err != nil || mode != Native {
			t.Fatalf("take over ifindex %d: %s, %v", ifi, mode, err)
		}
	}
	var links []string
	ents, _ := os.ReadDir(pin)
	for _, d := range ents {
		if strings.HasPrefix(d.Name(), "link-") {
			links = append(links, d.Name())
		}
	}
	want := []string{"link-" + itoa(l.vb) + "-native", "link-" + itoa(l.vc) + "-native"}
	slices.Sort(links)
	slices.Sort(want)
	if !slices.Equal(links, want) {
		t.Fatalf("pinned links %v, want %v", links, want)
	}
	if err := e2.Detach(); err != nil {
		t.Fatal(err)
	}
	if err := e2.Unpin(); err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{"sxvb", "sxvc"} {
		if xdpOn(t, l, dev+itoa(os.Getpid()%100000)) {
			t.Fatalf("program still attached to %s after Detach", dev)
		}
	}
	if ents, _ := os.ReadDir(pin); len(ents) != 0 {
		t.Fatalf("pins left after Unpin: %v", ents)
	}
}

// TestStaleLinkPinReplaced: a link pinned for an interface that was deleted
// since (the kernel detached it) is not reused for a new interface that got
// the same index: the agent attaches afresh and pins the new link there.
func TestStaleLinkPinReplaced(t *testing.T) {
	l := newLab(t)
	pin := bpffs(t)
	const idx = 4242
	mk := func() {
		sh(t, "ip", "-n", l.nsB, "link", "add", "sxstale", "index", itoa(idx), "type", "veth", "peer", "name", "sxstalep")
		sh(t, "ip", "-n", l.nsB, "link", "set", "sxstale", "up")
		sh(t, "ip", "-n", l.nsB, "link", "set", "sxstalep", "up")
	}
	mk()
	var e1, e2 *Engine
	var err error
	e1 = newEngineIn(t, l, Options{PinPath: pin})
	l.in(t, l.fdB, func() { _, err = e1.Attach(idx, false) })
	if err != nil {
		t.Fatal(err)
	}
	e1.Close() // the pinned link keeps the program attached
	sh(t, "ip", "-n", l.nsB, "link", "del", "sxstale")
	mk()
	e2 = newEngineIn(t, l, Options{PinPath: pin})
	defer e2.Close()
	var mode AttachMode
	l.in(t, l.fdB, func() { mode, err = e2.Attach(idx, false) })
	if err != nil || mode != Native {
		t.Fatalf("attach over a stale pinned link: %s, %v", mode, err)
	}
	if !xdpOn(t, l, "sxstale") {
		t.Fatal("no program on the new interface")
	}
	if err := e2.Detach(); err != nil {
		t.Fatal(err)
	}
	if err := e2.Unpin(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(pin); len(ents) != 0 {
		t.Fatalf("pins left after Unpin: %v", ents)
	}
}
