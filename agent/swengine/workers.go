package swengine

// splitWorkers shares total workers among n receive directions, each a
// power of 2 (an RSS indirection table spreads over a power of 2 of
// queues): each takes the largest power of 2 not above its fair share of
// what is left, so 12 over 2 interfaces is 4 and 8. Some workers may stay
// unused (7 over 1 is 4). It returns nil when there are fewer workers than
// directions.
func splitWorkers(total, n int) []int {
	if n < 1 || total < n {
		return nil
	}
	out := make([]int, n)
	left := total
	for i := range out {
		share := left / (n - i)
		p := 1
		for p*2 <= share {
			p *= 2
		}
		out[i] = p
		left -= p
	}
	return out
}
