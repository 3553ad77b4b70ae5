//go:build amd64 && !purego

package classifier

import (
	"unsafe"

	"github.com/scrubd/scrubd/swpath/rule"
)

// The layout of rule.Fields that laneKeys8 gathers (go_asm.h's
// const_fields*): a packet's first word holds Family, Proto and L4 in
// its bytes 0, 1 and 2, its ports word SrcPort and DstPort in bytes 0-1
// and 2-3, then the two addresses' high words. lanesKeys is false, and
// bursts keep laneKeysGo, where rule.Fields is laid out otherwise.
const (
	fieldsSize   = unsafe.Sizeof(rule.Fields{})
	fieldsPorts  = unsafe.Offsetof(rule.Fields{}.SrcPort)
	fieldsSrc    = unsafe.Offsetof(rule.Fields{}.Src)
	fieldsDst    = unsafe.Offsetof(rule.Fields{}.Dst)
	fieldsAsKeys = unsafe.Offsetof(rule.Fields{}.Family) == 0 &&
		unsafe.Offsetof(rule.Fields{}.Proto) == 1 &&
		unsafe.Offsetof(rule.Fields{}.L4) == 2 &&
		unsafe.Sizeof(rule.Fields{}.Family) == 1 &&
		unsafe.Offsetof(rule.Fields{}.DstPort) == fieldsPorts+2 &&
		fieldsPorts+8 <= fieldsSrc &&
		unsafe.Offsetof(rule.Addr{}.Hi) == 0
)
