package swengine

import (
	"slices"
	"testing"
)

func TestSplitWorkers(t *testing.T) {
	for _, tc := range []struct {
		total, n int
		want     []int
	}{
		{12, 2, []int{4, 8}}, {8, 2, []int{4, 4}}, {16, 1, []int{16}}, {7, 1, []int{4}}, {3, 3, []int{1, 1, 1}},
		{12, 1, []int{8}}, {1, 2, nil}, {4, 0, nil},
	} {
		got := splitWorkers(tc.total, tc.n)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%d over %d: %v, want %v", tc.total, tc.n, got, tc.want)
		}
		sum := 0
		for _, w := range got {
			if w&(w-1) != 0 {
				t.Errorf("%d over %d: %d is not a power of 2", tc.total, tc.n, w)
			}
			sum += w
		}
		if sum > tc.total {
			t.Errorf("%d over %d: %d used", tc.total, tc.n, sum)
		}
	}
}
