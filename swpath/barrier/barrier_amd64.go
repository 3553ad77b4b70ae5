package barrier

import "github.com/scrubd/scrubd/x86"

func fromDevice()                     { x86.LFENCE() }
func toDevice()                       { x86.CompilerBarrier() }
func flushWC()                        { x86.SFENCE() }
func full()                           { x86.MFENCE() }
func cycles() uint64                  { return x86.RDTSC() }
func cycleHz() uint64                 { return x86.TSCHz() }
func mmioWrite64(a *uint64, v uint64) { x86.MMIOWrite64(a, v) }
func mmioWrite32(a *uint32, v uint32) { x86.MMIOWrite32(a, v) }
