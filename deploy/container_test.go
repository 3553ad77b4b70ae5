package deploy_test

import (
	"os"
	"strings"
	"testing"
)

// No container daemon runs here, so the image is never built in tests. This
// checks what can be checked without one: every file the Containerfile
// copies exists in the repository or is one deploy/build.sh writes, for
// both architectures.
func TestContainerfileSources(t *testing.T) {
	cf, err := os.ReadFile("container/Containerfile")
	if err != nil {
		t.Fatal(err)
	}
	build, err := os.ReadFile("build.sh")
	if err != nil {
		t.Fatal(err)
	}
	copies := 0
	for _, l := range strings.Split(string(cf), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || f[0] != "COPY" {
			continue
		}
		copies++
		src := f[1]
		if name, ok := strings.CutPrefix(src, "out/"); ok {
			// build.sh names its outputs with $arch where the image has
			// ${TARGETARCH}.
			pattern := "$out/" + strings.ReplaceAll(name, "${TARGETARCH}", "$arch")
			if !strings.Contains(string(build), pattern) {
				t.Errorf("Containerfile copies %s, but build.sh writes no %s", src, pattern)
			}
			continue
		}
		if _, err := os.Stat("../" + src); err != nil {
			t.Errorf("Containerfile copies %s: %v", src, err)
		}
	}
	if copies == 0 {
		t.Fatal("no COPY lines found")
	}
	for _, stage := range []string{"FROM scratch AS static", "FROM debian:bookworm-slim AS mlx5", "ARG TARGETARCH"} {
		if !strings.Contains(string(cf), stage) {
			t.Errorf("Containerfile lacks %q", stage)
		}
	}
}
