// Package holes takes elements out of a slice by position, one copy per
// run between them: what the rule store and placement do when rules leave
// a set whose array others still hold (a new array, copied in runs).
package holes

// Close copies src into dst (len(src)-len(gone) long) without the elements
// at positions gone (ascending, distinct, each < len(src)), one copy per
// run between them.
func Close[T any](dst, src []T, gone []int) {
	k, from := 0, 0
	for _, g := range gone {
		k += copy(dst[k:], src[from:g])
		from = g + 1
	}
	copy(dst[k:], src[from:])
}
