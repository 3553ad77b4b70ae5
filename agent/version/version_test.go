package version

import (
	"strings"
	"testing"
)

func TestStringUsesLinkTimeValues(t *testing.T) {
	oldV, oldC, oldD := Version, Commit, Date
	t.Cleanup(func() { Version, Commit, Date = oldV, oldC, oldD })
	Version, Commit, Date = "v1.2.3-4-gabcdef0", "abcdef0123456789abcdef0123456789abcdef01", "2026-01-02T03:04:05Z"

	in := Get()
	if in.Version != Version || in.Commit != Commit || in.Date != Date {
		t.Fatalf("Get() = %+v, want the link-time values", in)
	}
	s := String()
	for _, want := range []string{"scrubd v1.2.3-4-gabcdef0 (", "commit abcdef012345,", "built 2026-01-02T03:04:05Z,", in.GoVersion, in.Platform} {
		if !strings.Contains(s, want) {
			t.Errorf("String() = %q, missing %q", s, want)
		}
	}
	if strings.Contains(s, "abcdef0123456789") {
		t.Errorf("String() = %q: commit not shortened to 12 characters", s)
	}
}

func TestStringWithoutLinkTimeValues(t *testing.T) {
	in := Info{Version: "dev", GoVersion: "go1.26.8", Platform: "linux/arm64"}
	if got, want := in.String(), "scrubd dev (go1.26.8, linux/arm64)"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
	in.Tags, in.CGO = "mlx5", true
	if got, want := in.String(), "scrubd dev (go1.26.8, linux/arm64, tags mlx5, cgo)"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}
