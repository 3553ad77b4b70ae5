//go:build amd64 || arm64

package barrier

import (
	"testing"
	"time"
)

// TestBarriersReturn calls every barrier. Neither this test nor qemu-user
// (which does not model the weak ordering) can show ordering; the
// instruction each one issues is checked by TestDisassembly and the
// ordering is argued from the architecture manuals.
func TestBarriersReturn(t *testing.T) {
	x := 0
	for _, f := range []func(){FromDevice, ToDevice, OrderingWrite, FlushWC, WCStart, Full} {
		f()
		x++
	}
	if x != 6 {
		t.Fatalf("ran %d barriers, want 6", x)
	}
}

// counterFuncs holds Cycles and CycleHz as func values so the linker keeps
// their out-of-line bodies, which TestDisassembly inspects.
var counterFuncs = []func() uint64{Cycles, CycleHz}

func TestCyclesAgreeWithCycleHz(t *testing.T) {
	cyc, freq := counterFuncs[0], counterFuncs[1]
	hz := freq()
	if hz == 0 {
		t.Fatal("CycleHz = 0")
	}
	t0 := time.Now()
	c0 := cyc()
	time.Sleep(50 * time.Millisecond)
	c1 := cyc()
	el := time.Since(t0)
	if c1 <= c0 {
		t.Fatalf("Cycles did not advance over %v: %d then %d", el, c0, c1)
	}
	ratio := float64(c1-c0) / el.Seconds() / float64(hz)
	t.Logf("CycleHz=%d, ratio over %v = %.3f", hz, el, ratio)
	if ratio > 1.05 || ratio < 0.2 {
		t.Fatalf("Cycles ran at %.3f x CycleHz=%d", ratio, hz)
	}
}

// The MMIO stores as func values, so the linker keeps their out-of-line
// bodies for TestDisassembly.
var (
	mmio64 = MMIOWrite64
	mmio32 = MMIOWrite32
)

// TestMMIOWrite stores through the facade: the value lands whole at the
// address given and nothing beside it moves.
func TestMMIOWrite(t *testing.T) {
	var w [3]uint64
	mmio64(&w[1], 0x1122334455667788)
	var h [3]uint32
	mmio32(&h[1], 0x99aabbcc)
	if w != [3]uint64{0, 0x1122334455667788, 0} || h != [3]uint32{0, 0x99aabbcc, 0} {
		t.Fatalf("MMIOWrite64 gave %#x, MMIOWrite32 %#x", w, h)
	}
}

func TestNoAllocs(t *testing.T) {
	CycleHz()
	n := testing.AllocsPerRun(100, func() {
		FromDevice()
		ToDevice()
		OrderingWrite()
		FlushWC()
		WCStart()
		Full()
		_ = Cycles()
		_ = CycleHz()
	})
	if n != 0 {
		t.Fatalf("allocs per run = %v, want 0", n)
	}
}

func BenchmarkBarrier(b *testing.B) {
	for _, bc := range []struct {
		name string
		f    func()
	}{{"FromDevice", FromDevice}, {"ToDevice", ToDevice}, {"FlushWC", FlushWC}, {"Full", Full}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				bc.f()
			}
		})
	}
	b.Run("Cycles", func(b *testing.B) {
		var s uint64
		for b.Loop() {
			s += Cycles()
		}
		_ = s
	})
}
