package barrier

import "github.com/scrubd/scrubd/arm"

func fromDevice()                     { arm.DMBOSHLD() }
func toDevice()                       { arm.DMBOSHST() }
func flushWC()                        { arm.DSBST() }
func full()                           { arm.DMBOSH() }
func cycles() uint64                  { return arm.CNTVCT() }
func cycleHz() uint64                 { return arm.CNTFRQ() }
func mmioWrite64(a *uint64, v uint64) { arm.MMIOWrite64(a, v) }
func mmioWrite32(a *uint32, v uint32) { arm.MMIOWrite32(a, v) }
