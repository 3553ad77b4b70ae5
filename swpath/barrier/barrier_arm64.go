package barrier

import "github.com/scrubd/scrubd/arm"

func fromDevice()     { arm.DMBOSHLD() }
func toDevice()       { arm.DMBOSHST() }
func flushWC()        { arm.DSBST() }
func full()           { arm.DMBOSH() }
func cycles() uint64  { return arm.CNTVCT() }
func cycleHz() uint64 { return arm.CNTFRQ() }
