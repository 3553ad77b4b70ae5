//go:build !(amd64 || arm64)

package classifier

import "time"

var clockStart = time.Now()

// cycles is the flow cache's clock where swpath/barrier has no counter:
// monotonic nanoseconds.
func cycles() uint64 { return uint64(time.Since(clockStart)) }
