package hwpath

import (
	"unsafe"

	"github.com/scrubd/scrubd/swpath/rule"
)

// posIn returns the place of r in set.Rules when r points at an element
// of the set's array (from its address: no pass over the set, no map of
// ids), and false when it points elsewhere (a copy).
func posIn(set *rule.Set, r *rule.Rule) (int, bool) {
	if len(set.Rules) == 0 || r == nil {
		return 0, false
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(set.Rules)))
	at := uintptr(unsafe.Pointer(r))
	size := unsafe.Sizeof(rule.Rule{})
	if at < base || (at-base)%size != 0 || (at-base)/size >= uintptr(len(set.Rules)) {
		return 0, false
	}
	i := int((at - base) / size)
	return i, &set.Rules[i] == r
}
