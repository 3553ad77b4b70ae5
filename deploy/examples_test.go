package deploy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/agent/cli"
	"github.com/scrubd/scrubd/agent/config"
)

// installDir is where the example configs expect their rule files: the
// package and container images install them there.
const installDir = "/etc/scrubd/"

// checkConfig validates config text the way `scrubd config check` does,
// rule files included, with installDir mapped to dir (where the rule files
// sit in this repository). Only that path prefix is rewritten.
func checkConfig(t *testing.T, name string, data []byte, dir string) (*config.Config, error) {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.ReplaceAll(data, []byte(installDir), []byte(abs+"/"))
	return config.Parse(name, data, true)
}

// exampleConfigs are every config in deploy/examples (rule files excluded).
func exampleConfigs(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob("examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range paths {
		if filepath.Base(p) != "rules.yaml" {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatal("no example configs found")
	}
	return out
}

// Every example passes `scrubd config check` as it stands in a fresh
// checkout: the command itself (cli.Config, what the binary runs), on the
// file where it is, from another working directory, so the rule files it
// names are found relative to the config's own directory.
func TestExampleConfigsValidate(t *testing.T) {
	examples := exampleConfigs(t)
	var abs []string
	for _, p := range examples {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		abs = append(abs, a)
	}
	t.Chdir(t.TempDir())
	for i, p := range abs {
		t.Run(filepath.Base(p), func(t *testing.T) {
			var out, errb bytes.Buffer
			if rc := cli.Config([]string{"check", p}, &out, &errb); rc != 0 || !strings.Contains(out.String(), p+": ok") {
				t.Fatalf("scrubd config check %s: rc %d\n%s%s", examples[i], rc, out.String(), errb.String())
			}
			c, err := config.Load(p)
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Rules.Files) == 0 {
				t.Errorf("%s names no rule file", p)
			}
			for _, f := range c.Rules.Files {
				if filepath.Dir(f) != filepath.Dir(p) {
					t.Errorf("%s: rule file %s is not next to it", p, f)
				}
			}
		})
	}
}

// loadCopy writes config text to a new directory beside a copy of the
// example rule file and loads it as `scrubd config check` does.
func loadCopy(t *testing.T, name string, data []byte) (*config.Config, error) {
	t.Helper()
	rules, err := os.ReadFile("examples/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return config.Load(p)
}

// TestExampleConfigsShape pins what each example stands for, so an edit
// cannot quietly turn the DPU example into something else.
func TestExampleConfigsShape(t *testing.T) {
	load := func(name string) *config.Config {
		t.Helper()
		data, err := os.ReadFile("examples/" + name)
		if err != nil {
			t.Fatal(err)
		}
		c, err := loadCopy(t, name, data)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	dpu := load("dpu-inline.yaml")
	if dpu.Offload.Backend != "tcflower" || !slices.Equal(dpu.Offload.Devices, []string{"p0", "p1"}) ||
		dpu.Software.Engine != "dv" || !dpu.KeepHW() || !dpu.FlowSpec.Enabled {
		t.Errorf("dpu-inline: offload %+v software %+v flowspec %v", dpu.Offload, dpu.Software, dpu.FlowSpec.Enabled)
	}
	cx := load("host-connectx.yaml")
	if cx.Offload.Backend != "tcflower" || cx.Software.Engine != "dv" {
		t.Errorf("host-connectx: backend %s engine %s", cx.Offload.Backend, cx.Software.Engine)
	}
	xdp := load("host-xdp.yaml")
	if xdp.Offload.Backend != "none" || xdp.Software.Engine != "xdp" || len(xdp.Software.Interfaces) == 0 {
		t.Errorf("host-xdp: backend %s engine %s interfaces %v", xdp.Offload.Backend, xdp.Software.Engine, xdp.Software.Interfaces)
	}
	sim := load("sim.yaml")
	if sim.Offload.Backend != "sim" || sim.Software.Engine != "dv" {
		t.Errorf("sim: backend %s engine %s", sim.Offload.Backend, sim.Software.Engine)
	}
}

// The check must refuse a broken example: an unknown key, a bad value and a
// rule file that does not exist.
func TestExampleConfigCheckCatchesMistakes(t *testing.T) {
	data, err := os.ReadFile("examples/dpu-inline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ old, new, want string }{
		{"  keep_on_shutdown: true\n", "  keep_on_shutdwn: true\n", "keep_on_shutdwn"},
		{"  high_water: 0.8\n", "  high_water: 1.8\n", "placement.high_water"},
		{"files: [rules.yaml]", "files: [missing.yaml]", "rules.files[0]"},
	} {
		if !bytes.Contains(data, []byte(c.old)) {
			t.Fatalf("example has no %q to break", c.old)
		}
		bad := bytes.Replace(data, []byte(c.old), []byte(c.new), 1)
		_, err := loadCopy(t, "dpu-inline.yaml", bad)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("broken example (%q): err = %v, want one naming %s", strings.TrimSpace(c.new), err, c.want)
		}
	}
}
