package deploy_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/dataplane"
)

// yamlKeys lists every key path of t's yaml tags ("offload.devices",
// "flowspec.neighbors[].address").
func yamlKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		key := prefix + name
		out = append(out, key)
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.Struct && ft.PkgPath() == t.PkgPath():
			out = append(out, yamlKeys(ft, key+".")...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct && ft.Elem().PkgPath() == t.PkgPath():
			out = append(out, yamlKeys(ft.Elem(), key+"[].")...)
		}
	}
	return out
}

// TestConfigReferenceComplete fails when agent/config gains a key that
// docs/config.md does not document, or the doc names a key that is gone.
func TestConfigReferenceComplete(t *testing.T) {
	doc, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	keys := yamlKeys(reflect.TypeOf(config.Config{}), "")
	if len(keys) < 40 {
		t.Fatalf("only %d config keys found", len(keys))
	}
	known := map[string]bool{}
	for _, k := range keys {
		known[k] = true
		if !strings.Contains(string(doc), "| `"+k+"` |") {
			t.Errorf("config key %s has no row in docs/config.md", k)
		}
	}
	for _, l := range strings.Split(string(doc), "\n") {
		if k, ok := strings.CutPrefix(l, "| `"); ok {
			k, _, _ = strings.Cut(k, "`")
			if !known[k] {
				t.Errorf("docs/config.md documents %s, which agent/config does not have", k)
			}
		}
	}
}

// TestRunbookExplainsEveryReason: each reason the agent reports for a rule
// not in hardware (dataplane.Kinds, exported as
// scrubd_hw_install_failures_total{reason}) has a row in the runbook.
func TestRunbookExplainsEveryReason(t *testing.T) {
	doc, err := os.ReadFile("../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range dataplane.Kinds() {
		if !strings.Contains(string(doc), "| `"+k.String()+"` |") {
			t.Errorf("docs/runbook.md has no row for hardware refusal reason %s", k)
		}
	}
}
