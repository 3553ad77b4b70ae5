package classifier

import (
	"unsafe"

	"github.com/scrubd/scrubd/swpath/rule"
)

// memBytes is the memory held by the lookup structures. unsafe.Sizeof gives
// the struct sizes of this build's architecture (the Go spec's size rules).
func (t *Table) memBytes() int {
	n := len(t.entries)*int(unsafe.Sizeof(entry{})+unsafe.Sizeof(echeck{})) + len(t.res)*int(unsafe.Sizeof(residual{}))
	for i := range t.tables {
		ht := &t.tables[i]
		n += len(ht.slots)*int(unsafe.Sizeof(slot{})) + 8*len(ht.bloom)
	}
	n += len(t.pf.slots) * int(unsafe.Sizeof(pfSlot{}))
	if t.pf.src8 != nil {
		n += int(unsafe.Sizeof(*t.pf.src8))
	}
	if t.pf.dst8 != nil {
		n += int(unsafe.Sizeof(*t.pf.dst8))
	}
	if tr := t.tr; tr != nil {
		n += len(tr.ents)*int(unsafe.Sizeof(entry{})) + 4*len(tr.vrule)
		if tr.tcls != nil {
			n += int(unsafe.Sizeof(tclasses{})) + 4*(len(tr.trule)+len(tr.tfirst))
		}
		for i := range tr.t {
			d := &tr.t[i]
			n += treeBytes(len(d.nodes), len(d.rec)) + len(d.crec)*int(unsafe.Sizeof(crec{})) + len(d.blk)*int(unsafe.Sizeof(sblock{})) + len(d.cblk)*int(unsafe.Sizeof(cblock{})) + len(d.tblk)*int(unsafe.Sizeof(tblock{})) + len(d.tent)*4*vecBlock + 4*len(d.nodes32)
		}
	}
	for i := range t.res {
		r := &t.res[i]
		n += len(r.proto) + int(unsafe.Sizeof(rule.Range{}))*(len(r.srcPort)+len(r.dstPort)+len(r.port)+len(r.itype)+len(r.icode)+len(r.length))
	}
	return n
}

// hashBytes is the size of the prefilter's hash.
func (p *prefilter) hashBytes() int { return len(p.slots) * int(unsafe.Sizeof(pfSlot{})) }

// treeBytes is the size of a tree of nodes node words and recs leaf records.
func treeBytes(nodes, recs int) int { return 8*nodes + recs*int(unsafe.Sizeof(trec{})) }

// cRecordBytes is a compact block's bytes a record.
const cRecordBytes = int(unsafe.Sizeof(cblock{})) / vecBlock

// An entry is one cache line (see entry): these fail to compile when it
// grows or shrinks.
var (
	_ [unsafe.Sizeof(entry{}) - 64]struct{}
	_ [64 - unsafe.Sizeof(entry{})]struct{}
)
