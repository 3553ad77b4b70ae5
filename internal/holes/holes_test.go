package holes

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCloseAgainstFilter: Close equals a filter that keeps every element
// whose position is not in gone, on random slices and hole sets (none,
// all, first, last, adjacent).
func TestCloseAgainstFilter(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 40 {
		src := make([]int, n)
		for i := range src {
			src[i] = 1000 + i
		}
		for range 50 {
			var gone []int
			for i := range n {
				if r.IntN(3) == 0 {
					gone = append(gone, i)
				}
			}
			var want []int
			for i, v := range src {
				if !slices.Contains(gone, i) {
					want = append(want, v)
				}
			}
			dst := make([]int, n-len(gone))
			Close(dst, src, gone)
			if !slices.Equal(dst, want) {
				t.Fatalf("Close(%v, gone %v) = %v, want %v", src, gone, dst, want)
			}
		}
	}
}
