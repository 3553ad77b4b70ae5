package dv_test

import (
	"bufio"
	"bytes"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/tests/disasm"
)

// The barrier each role issues on each architecture: the table in
// swpath/barrier's package doc (rdma-core util/udma_barrier.h, Arm ARM
// C6.2, Intel SDM Vol. 2), written out here rather than read from it.
var roleStub = map[string]map[string]string{
	"amd64": {"FromDevice": "LFENCE", "ToDevice": "CompilerBarrier", "WCStart": "SFENCE", "FlushWC": "SFENCE", "Full": "MFENCE"},
	"arm64": {"FromDevice": "DMBOSHLD", "ToDevice": "DMBOSHST", "WCStart": "DSBST", "FlushWC": "DSBST", "Full": "DMBOSH"},
}

// placement is what each hot function must contain, in address order:
// the owner-word load (prm.LoadWord, inlined), the barriers by role, and
// the doorbell stores (prm.StoreDBR, the doorbell record; prm.Copy64, the
// BlueFlame register). The orders follow rdma-core: cq.c
// mlx5_get_next_cqe (owner check, then udma_from_device_barrier before
// the entry is read), update_cons_index (the consumer-index store), qp.c
// mlx5_post_wq_recv (barrier, then the receive doorbell record) and
// post_send_db (barrier, doorbell record, mmio_wc_start, the BlueFlame
// write, mmio_flush_writes). Reap is a loop whose tail (the consumer-index
// store) the compiler lays out before its head; its order is the layout
// of Go 1.26 on both architectures.
var placement = map[string][]string{
	"(*RxQueue).Poll":   {"owner-load", "FromDevice", "ToDevice", "StoreDBR"},
	"(*RxQueue).Refill": {"Full", "StoreDBR"},
	"(*TxQueue).Ring":   {"ToDevice", "StoreDBR", "WCStart", "Copy64", "FlushWC"},
	"(*TxQueue).Reap":   {"ToDevice", "StoreDBR", "owner-load", "FromDevice", "owner-load"},
}

// TestBarrierPlacement builds this package for amd64 and arm64, and
// checks by disassembly that the receive and send hot paths issue their
// barriers in the order above relative to the owner-word loads and the
// doorbell stores, and that the doorbell stores themselves are one plain
// store each (barrier.MMIOWrite32/64), with no locked or release store.
// Removing or moving any barrier in rxq.go or txq.go fails it.
func TestBarrierPlacement(t *testing.T) {
	loadLine := funcLine(t, "prm/access_unsafe.go", "func LoadWord(")
	callRe := regexp.MustCompile(`CALL github\.com/scrubd/scrubd/(?:(x86|arm)\.(\w+)\.abi0|swpath/dv/prm\.(StoreDBR|Copy64))\(SB\)`)
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			bin := disasm.Build(t, arch)
			out := disasm.Objdump(t, bin, `^github.com/scrubd/scrubd/swpath/dv\.\(\*(RxQueue|TxQueue)\)\.(Poll|Refill|Ring|Reap)$`)
			got := map[string][]string{}
			var cur string
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				line := sc.Text()
				if rest, ok := strings.CutPrefix(line, "TEXT github.com/scrubd/scrubd/swpath/dv."); ok {
					cur = strings.TrimSuffix(strings.Fields(rest)[0], "(SB)")
					continue
				}
				f := strings.Fields(line)
				if cur == "" || len(f) < 4 {
					continue
				}
				ev := ""
				if f[0] == "access_unsafe.go:"+strconv.Itoa(loadLine) {
					ev = "owner-load"
				} else if m := callRe.FindStringSubmatch(line); m != nil {
					ev = m[2] + m[3]
				}
				if ev != "" && (len(got[cur]) == 0 || got[cur][len(got[cur])-1] != ev) {
					got[cur] = append(got[cur], ev)
				}
			}
			for fn, roles := range placement {
				want := make([]string, len(roles))
				for i, r := range roles {
					want[i] = r
					if s, ok := roleStub[arch][r]; ok {
						want[i] = s
					}
				}
				if !slices.Equal(got[fn], want) {
					t.Errorf("%s %s: barriers, owner loads and doorbell stores in order %v, want %v (%v)", arch, fn, got[fn], want, roles)
				}
			}

			// The doorbell stores: one call to the plain-store stub, no
			// locked instruction (XCHG, LOCK prefix) or store-release.
			out = disasm.Objdump(t, bin, `^github.com/scrubd/scrubd/swpath/dv/prm\.(StoreDBR|Copy64)$`)
			stub := map[string]string{"StoreDBR": "MMIOWrite32", "Copy64": "MMIOWrite64"}
			calls := map[string][]string{}
			cur = ""
			sc = bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				line := sc.Text()
				if rest, ok := strings.CutPrefix(line, "TEXT github.com/scrubd/scrubd/swpath/dv/prm."); ok {
					cur = strings.TrimSuffix(strings.Fields(rest)[0], "(SB)")
					calls[cur] = []string{}
					continue
				}
				f := strings.Fields(line)
				if cur == "" || len(f) < 4 {
					continue
				}
				op := f[3]
				if strings.HasPrefix(op, "XCHG") || strings.HasPrefix(op, "LOCK") || strings.HasPrefix(op, "STLR") || strings.HasPrefix(op, "STLXR") || strings.HasPrefix(op, "SWP") {
					t.Errorf("%s prm.%s: locked or release store %s", arch, cur, strings.Join(f[3:], " "))
				}
				if m := callRe.FindStringSubmatch(line); m != nil && m[2] != "" {
					calls[cur] = append(calls[cur], m[2])
				}
			}
			for fn, s := range stub {
				if c, ok := calls[fn]; !ok || !slices.Equal(c, []string{s}) {
					t.Errorf("%s prm.%s calls %v, want exactly [%s] (a plain store)", arch, fn, c, s)
				}
			}
		})
	}
}

// funcLine returns the line of file (relative to this package) that
// starts with prefix.
func funcLine(t *testing.T, file, prefix string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			return i + 1
		}
	}
	t.Fatalf("%s: no line starting %q", file, prefix)
	return 0
}
