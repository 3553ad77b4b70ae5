//go:build !purego

package classifier

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/tests/disasm"
)

// TestStubsVEX disassembles the package's amd64 stubs (its ABI0
// functions, which only the .s files define) with GNU objdump, which
// decodes VEX and EVEX where go tool objdump does not, and requires:
//
//   - every instruction that names a vector register to be VEX or EVEX
//     encoded: its first byte C4 or C5 (VEX, Intel SDM vol. 2, 2.3.5) or
//     62 (EVEX, 2.7.1), not legacy SSE (an optional 66/F2/F3 and REX
//     prefix before 0F);
//   - the last instruction before each RET that names a vector register
//     or clears them to be VZEROUPPER, so that the Go code after a stub
//     (whose ABI wrapper clears X15 with legacy XORPS) finds the upper
//     halves clean.
//
// A legacy SSE instruction run while the upper halves of YMM0-15 are
// dirty is the transition the Intel optimization manual tells code to
// avoid ("Mixing AVX code with SSE code"). On an Intel Xeon (family 6
// model 207) under KVM each one cost about 200 ns: leafScan2, whose
// operands went to X registers by legacy MOVQ after its first
// VPBROADCASTD, took 1074 ns a call, and 15.8 with VMOVQ (Table.Decide at
// 1k ClassBench-style rules: 1170 ns a packet, then 74). The encodings
// come from the binary, not from the source.
func TestStubsVEX(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package's test binary again: not in -short")
	}
	objdump, err := exec.LookPath("objdump")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but GNU objdump (binutils) is missing: %v", err)
		}
		t.Skipf("GNU objdump (binutils) is missing: %v", err)
	}
	// go test strips the binary it runs; disasm.Build does not.
	out, err := exec.Command(objdump, "-d", "-w", disasm.Build(t, "amd64")).Output()
	if err != nil {
		t.Fatalf("objdump -d: %v", err)
	}
	vec, rets := checkVEX(t, out)
	// The stubs hold hundreds of vector instructions and dozens of RETs: a
	// parse that found few checked nothing.
	if vec < 500 || rets < 15 {
		t.Fatalf("found %d vector instructions and %d RETs in the amd64 stubs, want at least 500 and 15", vec, rets)
	}
	t.Logf("%d vector instructions, all VEX or EVEX; %d RETs, each after VZEROUPPER or no vector code", vec, rets)
}

var (
	// stubSym matches objdump's header of one of the package's ABI0
	// functions.
	stubSym = regexp.MustCompile(`^[0-9a-f]+ <github\.com/scrubd/scrubd/swpath/classifier\.([^>]+)\.abi0>:$`)
	// upperReg matches a register whose write dirties the upper halves
	// that VZEROUPPER clears (a VEX or EVEX write to an XMM register
	// clears them).
	upperReg = regexp.MustCompile(`%[yz]mm([0-9]|1[0-5])\b`)
	// anyReg matches any vector register.
	anyReg = regexp.MustCompile(`%[xyz]mm[0-9]+\b`)
)

// checkVEX checks GNU objdump -d -w output as TestStubsVEX says and
// returns the vector instructions and RETs it checked.
func checkVEX(t *testing.T, out []byte) (vec, rets int) {
	t.Helper()
	var stub string
	dirty := false // a vector instruction since the last VZEROUPPER
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := stubSym.FindStringSubmatch(line); m != nil {
			stub, dirty = m[1], false
			continue
		}
		if line == "" {
			stub = ""
			continue
		}
		// "  addr:\tbytes\tmnemonic operands", -w: one line an instruction.
		f := strings.Split(line, "\t")
		if stub == "" || len(f) < 3 {
			continue
		}
		enc, inst := strings.Fields(f[1]), strings.TrimSpace(f[2])
		if len(enc) == 0 {
			continue
		}
		mn, _, _ := strings.Cut(inst, " ")
		switch {
		case mn == "vzeroupper":
			dirty = false
		case mn == "ret":
			rets++
			if dirty {
				t.Errorf("%s: RET at %s with the upper halves dirty: no VZEROUPPER after its last vector instruction", stub, strings.TrimSpace(f[0]))
			}
		case anyReg.MatchString(inst):
			vec++
			if upperReg.MatchString(inst) {
				dirty = true
			}
			switch enc[0] {
			case "c4", "c5", "62":
			default:
				t.Errorf("%s: %s (%s) is legacy SSE, not VEX or EVEX: a transition beside AVX code", stub, inst, strings.Join(enc, " "))
			}
		}
	}
	return vec, rets
}
