//go:build amd64 || arm64

package classifier

import "github.com/scrubd/scrubd/swpath/barrier"

// cycles is the flow cache's clock (flowCache.begin): the time-stamp
// counter on amd64, CNTVCT_EL0 on arm64 (swpath/barrier.Cycles). Only
// differences between bursts of one worker are compared, so its rate does
// not matter.
func cycles() uint64 { return barrier.Cycles() }
