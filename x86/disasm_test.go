package x86

import (
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
	if g := golden["CompilerBarrier"]; len(g) != 1 {
		t.Errorf("CompilerBarrier must be a bare RET, golden has %v", g)
	}
}
