package cputime

import "testing"

// Process grows while this process spins.
func TestProcessGrows(t *testing.T) {
	t0 := Process()
	x := 0
	for i := range 50_000_000 {
		x += i & 3
	}
	if x == 0 {
		t.Fatal("the loop was not run")
	}
	if d := Process() - t0; d <= 0 {
		t.Fatalf("CPU time moved by %v over a busy loop", d)
	}
}
