package rule

import (
	"fmt"
	"slices"
)

// Order gives rules appended to a Set the places of others in the decision
// order. A rule changed where it stands (the same id, the same place in the
// store's order) is appended to the array rather than written over its old
// copy, which engines may still be reading, and its old position becomes a
// hole (Holes); Order says that the appended rule decides where the hole
// stood: its key. A position's key is the position itself unless Order
// names another, and rule.Before compares keys, not positions (Set.Key).
//
// The keys are a tail: positions from base on, as many as keys holds; past
// the tail, and below base, a position is its own key. With appends to the
// tail in place, so a Set made from another by a change in place shares
// its keys as it shares its Rules: an Order is read-only once a Set holds
// it, and, like an array appended to in place, is extended by one writer
// only, each time from the newest. The nil *Order moves nothing.
type Order struct {
	base  int
	keys  []int32
	moved int // positions of the tail whose key is not their own
}

// Key returns the place in the decision order of position i.
func (o *Order) Key(i int) int {
	if o == nil || i < o.base || i-o.base >= len(o.keys) {
		return i
	}
	return int(o.keys[i-o.base])
}

// Moved is the number of positions whose key is not their own (holes
// among them: a rule moved and later removed keeps its key).
func (o *Order) Moved() int {
	if o == nil {
		return 0
	}
	return o.moved
}

// With returns o with position i placed at key (a new Order sharing o's
// tail, appended to in place where it has room). i must be past every
// position o names (the positions appended since), and key below i.
func (o *Order) With(i, key int) *Order {
	if key < 0 || key >= i || i > 1<<31-1 {
		panic(fmt.Sprintf("rule.Order.With(%d, %d)", i, key))
	}
	if o == nil || len(o.keys) == 0 {
		return &Order{base: i, keys: []int32{int32(key)}, moved: 1}
	}
	end := o.base + len(o.keys)
	if i < end {
		panic(fmt.Sprintf("rule.Order.With(%d, %d): the keys reach %d", i, key, end))
	}
	keys := o.keys
	for p := end; p < i; p++ {
		keys = append(keys, int32(p))
	}
	return &Order{base: o.base, keys: append(keys, int32(key)), moved: o.moved + 1}
}

// Key returns the place in the decision order of position i of s.Rules
// (Order; i itself unless a change in place moved the rule there).
func (s *Set) Key(i int) int { return s.Order.Key(i) }

// Ordered calls f for each live position of s in decision order (by key;
// the same as position order when nothing was moved).
func (s *Set) Ordered(f func(i int)) { s.Order.Walk(len(s.Rules), s.Holes, f) }

// EachMoved calls f, in ascending order, for each live position of s whose
// key is not its own (a rule changed in place, appended).
func (s *Set) EachMoved(f func(i int)) { s.Order.eachMoved(len(s.Rules), s.Holes, f) }

// Walk calls f for each position below n that is not one of holes, in
// decision order by o's keys: Set.Ordered of a set of n positions with
// those holes and keys (for code that keeps a set's shape without the
// set). A position moved in place comes where its key is.
func (o *Order) Walk(n int, holes *Holes, f func(i int)) {
	if o.Moved() == 0 {
		for i := range n {
			if !holes.Dead(i) {
				f(i)
			}
		}
		return
	}
	var moved [][2]int // key, position
	o.eachMoved(n, holes, func(i int) { moved = append(moved, [2]int{o.Key(i), i}) })
	slices.SortFunc(moved, func(a, b [2]int) int { return a[0] - b[0] })
	k := 0
	for i := range n {
		for k < len(moved) && moved[k][0] <= i {
			f(moved[k][1])
			k++
		}
		if !holes.Dead(i) && o.Key(i) == i {
			f(i)
		}
	}
	for ; k < len(moved); k++ {
		f(moved[k][1])
	}
}

// eachMoved calls f, in ascending order, for each position below n that
// is not one of holes and whose key is not its own.
func (o *Order) eachMoved(n int, holes *Holes, f func(i int)) {
	if o.Moved() == 0 {
		return
	}
	for k, key := range o.keys {
		i := o.base + k
		if i >= n {
			return
		}
		if int(key) != i && !holes.Dead(i) {
			f(i)
		}
	}
}
