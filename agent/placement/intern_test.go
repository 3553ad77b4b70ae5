package placement

import (
	"fmt"
	"strings"
	"testing"
)

// intern gives back the first copy of an equal text, and its table stays
// within maxTexts however many distinct texts pass through.
func TestInternBounded(t *testing.T) {
	p := &Placer{}
	a := p.intern(strings.Repeat("x", 3) + "y")
	if b := p.intern("xxx" + strings.ToLower("Y")); b != a || len(p.texts) != 1 {
		t.Fatalf("intern of an equal text: %q (another copy), %d texts", *b, len(p.texts))
	}
	for i := range 3 * maxTexts {
		p.intern(fmt.Sprint("reason ", i))
		if len(p.texts) > maxTexts {
			t.Fatalf("%d texts held after %d distinct, more than %d", len(p.texts), i+1, maxTexts)
		}
	}
}
