package barrier

import "github.com/scrubd/scrubd/x86"

func fromDevice()     { x86.LFENCE() }
func toDevice()       { x86.CompilerBarrier() }
func flushWC()        { x86.SFENCE() }
func full()           { x86.MFENCE() }
func cycles() uint64  { return x86.RDTSC() }
func cycleHz() uint64 { return x86.TSCHz() }
