package arm

import (
	"fmt"
	"slices"
	"testing"

	"github.com/scrubd/scrubd/tests/disasm"
)

// TestDisassembly cross-compiles this package's test binary for arm64 (on
// any host), disassembles it with `go tool objdump`, and requires every
// stub in barrier_arm64.s to be exactly the instruction words listed in
// testdata/objdump_arm64.golden. A barrier with a wrong option still runs,
// so only this check catches it.
func TestDisassembly(t *testing.T) {
	disasm.Check(t, "arm64", "github.com/scrubd/scrubd/arm", "barrier_arm64.s", "testdata/objdump_arm64.golden")
}

// TestGoldenMatchesArchitecture checks the golden words themselves against
// the encoding formulas of the Arm ARM (C6.2 DMB/DSB: 0xd50330bf|CRm<<8 and
// 0xd503309f|CRm<<8; C6.2 MRS with o0=1,op1=3,CRn=14,CRm=0,op2=2 for
// CNTVCT_EL0 and op2=0 for CNTFRQ_EL0; RET = 0xd65f03c0), so a golden
// regenerated from a wrong build would fail here.
func TestGoldenMatchesArchitecture(t *testing.T) {
	dmb := func(crm uint32) string { return fmt.Sprintf("%08x", 0xd50330bf|crm<<8) }
	dsb := func(crm uint32) string { return fmt.Sprintf("%08x", 0xd503309f|crm<<8) }
	// MRS Xt, S3_3_C14_C0_op2: 0xd5300000 | o0<<19 | op1<<16 | CRn<<12 | CRm<<8 | op2<<5 | Rt
	mrs := func(op2, rt uint32) string {
		return fmt.Sprintf("%08x", 0xd5300000|1<<19|3<<16|14<<12|0<<8|op2<<5|rt)
	}
	const ret = "d65f03c0"
	golden := disasm.ReadGolden(t, "testdata/objdump_arm64.golden")
	want := map[string]string{
		"DMBOSHLD": dmb(0b0001),
		"DMBOSHST": dmb(0b0010),
		"DMBOSH":   dmb(0b0011),
		"DSBST":    dsb(0b1110),
		"CNTVCT":   mrs(2, 0),
		"CNTFRQ":   mrs(0, 0),
	}
	// LDR/STR (immediate, unsigned offset), Arm ARM C6.2: size|111001|opc|
	// imm12|Rn|Rt. 64-bit LDR 0xf9400000, STR 0xf9000000; 32-bit LDR
	// 0xb9400000, STR 0xb9000000; imm12 is the offset / access size. A
	// store-release (STLR, 0xc89ffc00 / 0x889ffc00) would differ.
	ldst := func(base, off, size, rn, rt uint32) string {
		return fmt.Sprintf("%08x", base|off/size<<10|rn<<5|rt)
	}
	const sp = 31
	mmio := map[string][]string{
		"MMIOWrite64": {ldst(0xf9400000, 8, 8, sp, 0), ldst(0xf9400000, 16, 8, sp, 1), ldst(0xf9000000, 0, 8, 0, 1), ret},
		"MMIOWrite32": {ldst(0xf9400000, 8, 8, sp, 0), ldst(0xb9400000, 16, 4, sp, 1), ldst(0xb9000000, 0, 4, 0, 1), ret},
	}
	for name, w := range mmio {
		want[name] = w[0]
		if g := golden[name]; !slices.Equal(g, w) {
			t.Errorf("golden %s = %v, want %v", name, g, w)
		}
	}
	if len(golden) != len(want) {
		t.Errorf("golden has %d stubs, want %d", len(golden), len(want))
	}
	for name, first := range want {
		g := golden[name]
		if len(g) < 2 || g[0] != first || g[len(g)-1] != ret {
			t.Errorf("golden %s = %v, want first word %s and last word %s (RET)", name, g, first, ret)
		}
	}
}
