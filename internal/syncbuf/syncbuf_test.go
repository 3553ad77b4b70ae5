package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Concurrent writers and a reader: every write is there once, whole (run
// with -race, which CI does for this package's users' packages).
func TestConcurrentWriters(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				b.Write([]byte("line\n"))
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if n := strings.Count(b.String(), "line\n"); n != 800 {
		t.Fatalf("%d lines, want 800", n)
	}
}
