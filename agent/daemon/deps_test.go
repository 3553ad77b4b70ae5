package daemon

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The agent's wiring knows no simulator: the simulated NIC is a backend
// that agent/backend builds from the config, like a real device, and the
// live view of run --sim is agent/view's. Neither they nor the benchmark
// (the start-up calibration is the software engine's, agent/swengine) are
// among the daemon's dependencies, direct or not, in any build.
func TestDaemonDependsOnNoSimulator(t *testing.T) {
	// go test puts its own go command first on the PATH.
	gobin, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no go command to list the dependencies: %v", err)
		}
		t.Skipf("no go command to list the dependencies: %v", err)
	}
	banned := []string{
		"github.com/scrubd/scrubd/agent/sim",
		"github.com/scrubd/scrubd/agent/view",
		"github.com/scrubd/scrubd/swpath/bench",
	}
	for _, tags := range []string{"", "mlx5"} {
		out, err := exec.Command(gobin, "list", "-deps", "-tags", tags, ".").CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps -tags %q: %v\n%s", tags, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 10 {
			t.Fatalf("go list -deps -tags %q listed %d packages: %q", tags, len(deps), deps)
		}
		for _, d := range deps {
			for _, b := range banned {
				if d == b {
					t.Errorf("agent/daemon (tags %q) depends on %s", tags, b)
				}
			}
		}
	}
}
