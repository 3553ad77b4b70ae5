//go:build mlx5 && cgo

package verbs

import "testing"

// TestLayoutMatchesRdmaCore checks every prm layout constant against
// offsetof/sizeof and the enum values in rdma-core's mlx5dv.h, as
// installed (Debian's libibverbs-dev).
func TestLayoutMatchesRdmaCore(t *testing.T) {
	tab := layoutTable()
	if len(tab) < 60 {
		t.Fatalf("only %d entries", len(tab))
	}
	for _, e := range tab {
		if e.c != e.prm {
			t.Errorf("%s: rdma-core %d (%#x), prm %d (%#x)", e.name, e.c, e.c, e.prm, e.prm)
		}
	}
}
