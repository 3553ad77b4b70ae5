package x86

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/tests/disasm"
)

// TestDisassembly cross-compiles this package's test binary for amd64 (on
// any host), disassembles it with `go tool objdump`, and requires every
// stub in barrier_amd64.s to be exactly the instruction words listed in
// testdata/objdump_amd64.golden. A barrier with a wrong option still runs,
// so only this check catches it.
func TestDisassembly(t *testing.T) {
	disasm.Check(t, "amd64", "github.com/scrubd/scrubd/x86", "barrier_amd64.s", "testdata/objdump_amd64.golden")
}

// TestGoldenMatchesArchitecture checks the golden bytes against the
// opcodes in the Intel SDM Vol. 2 (LFENCE 0F AE E8, SFENCE 0F AE F8, MFENCE
// 0F AE F0, RDTSC 0F 31, RET C3), so a golden regenerated from a wrong build
// fails here.
func TestGoldenMatchesArchitecture(t *testing.T) {
	const ret = "c3"
	want := map[string]string{
		"LFENCE":          "0faee8",
		"SFENCE":          "0faef8",
		"MFENCE":          "0faef0",
		"CompilerBarrier": ret,
		"RDTSC":           "0f31",
		"MMIOWrite64":     "488b442408",
		"MMIOWrite32":     "488b442408",
	}
	golden := disasm.ReadGolden(t, "testdata/objdump_amd64.golden")
	if len(golden) != len(want) {
		t.Errorf("golden has %d stubs, want %d", len(golden), len(want))
	}
	for name, first := range want {
		g := golden[name]
		if len(g) < 1 || g[0] != first || g[len(g)-1] != ret {
			t.Errorf("golden %s = %v, want first %s and last %s (RET)", name, g, first, ret)
		}
	}
	// The MMIO stubs in full, from the SDM's encodings: MOV r64, r/m64 is
	// REX.W(48) 8B /r; MOV r/m64, r64 is REX.W 89 /r; MOV r/m32, r32 is
	// 89 /r. ModRM 0x44 = [SIB+disp8] with reg RAX, SIB 0x24 = RSP base;
	// 0x4c the same with reg RCX; 0x08 = [RAX] with reg RCX. The Go ABI0
	// arguments sit at 8(SP) and 16(SP).
	modrm := func(mod, reg, rm byte) string { return fmt.Sprintf("%02x", mod<<6|reg<<3|rm) }
	const rax, rcx, rsp = 0, 1, 4
	loadAddr := "488b" + modrm(1, rax, rsp) + "24" + "08"
	store := map[string][]string{
		"MMIOWrite64": {loadAddr, "488b" + modrm(1, rcx, rsp) + "24" + "10", "4889" + modrm(0, rcx, rax), ret},
		"MMIOWrite32": {loadAddr, "8b" + modrm(1, rcx, rsp) + "24" + "10", "89" + modrm(0, rcx, rax), ret},
	}
	for name, w := range store {
		if g := golden[name]; !slices.Equal(g, w) {
			t.Errorf("golden %s = %v, want %v", name, g, w)
		}
		for _, ins := range golden[name] {
			// No LOCK prefix (F0) and no XCHG (87, locked with memory).
			if strings.HasPrefix(ins, "f0") || strings.HasPrefix(ins, "87") || strings.HasPrefix(ins, "4887") {
				t.Errorf("golden %s has a locked instruction %s", name, ins)
			}
		}
	}
	if g := golden["CompilerBarrier"]; len(g) != 1 {
		t.Errorf("CompilerBarrier must be a bare RET, golden has %v", g)
	}
}
