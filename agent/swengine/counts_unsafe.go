package swengine

import (
	"unsafe"

	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/swpath/classifier"
)

// dataplane.Counter and classifier.Count are the same two uint64s,
// packets then bytes: a build fails here if they part.
const (
	_ = uint(unsafe.Sizeof(dataplane.Counter{}) - unsafe.Sizeof(classifier.Count{}))
	_ = uint(unsafe.Sizeof(classifier.Count{}) - unsafe.Sizeof(dataplane.Counter{}))
	_ = uint(unsafe.Offsetof(dataplane.Counter{}.Bytes) - unsafe.Offsetof(classifier.Count{}.Bytes))
	_ = uint(unsafe.Offsetof(classifier.Count{}.Bytes) - unsafe.Offsetof(dataplane.Counter{}.Bytes))
)

// asCounts is b's array read as classifier counts (length and capacity
// kept).
func asCounts(b []dataplane.Counter) []classifier.Count {
	if cap(b) == 0 {
		return nil
	}
	return unsafe.Slice((*classifier.Count)(unsafe.Pointer(unsafe.SliceData(b))), cap(b))[:len(b)]
}

// asCounters is c's array read as dataplane counters (length and
// capacity kept).
func asCounters(c []classifier.Count) []dataplane.Counter {
	if cap(c) == 0 {
		return nil
	}
	return unsafe.Slice((*dataplane.Counter)(unsafe.Pointer(unsafe.SliceData(c))), cap(c))[:len(c)]
}
