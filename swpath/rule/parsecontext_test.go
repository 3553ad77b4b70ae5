package rule

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// errAfter is a context whose Err is nil for the first n calls, then
// context.Canceled.
type errAfter struct {
	context.Context
	n, calls int
}

func (c *errAfter) Err() error {
	c.calls++
	if c.calls > c.n {
		return context.Canceled
	}
	return nil
}

// ParseContext parses as Parse while ctx is live, and gives up between
// chunks of items once it is done: a file of 5 chunks with a context done
// after the second chunk is checked returns the context's error after
// looking at it 3 times, not the set.
func TestParseContextStopsBetweenChunks(t *testing.T) {
	var b strings.Builder
	b.WriteString("rules:\n")
	for i := range 5 * itemsPerChunk {
		fmt.Fprintf(&b, "  - {id: r%d, action: drop, match: {dst: 10.%d.%d.0/24}}\n", i, i/256, i%256)
	}
	data := []byte(b.String())
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	want, err := Parse("f", data, now)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseContext(context.Background(), "f", data, now)
	if err != nil || len(got.Rules) != len(want.Rules) || got.Rules[len(got.Rules)-1].ID != want.Rules[len(want.Rules)-1].ID {
		t.Fatalf("live context: %v, %d rules, want %d", err, len(got.Rules), len(want.Rules))
	}
	ctx := &errAfter{Context: context.Background(), n: 2}
	set, err := ParseContext(ctx, "f", data, now)
	if !errors.Is(err, context.Canceled) || set != nil || ctx.calls != 3 {
		t.Fatalf("done after 2 chunks: set %v, err %v, %d checks", set != nil, err, ctx.calls)
	}
}
