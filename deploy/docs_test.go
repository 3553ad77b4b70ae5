package deploy_test

import (
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/dataplane"
	"github.com/scrubd/scrubd/internal/doctable"
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
	for k := range doctable.Rows(string(doc), "") {
		if !known[k] {
			t.Errorf("docs/config.md documents %s, which agent/config does not have", k)
		}
	}
}

// defaultValues maps each key path of v's yaml tags to its value, for the
// keys outside lists (a list element has no default to compare).
func defaultValues(v reflect.Value, prefix string, out map[string]reflect.Value) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		f := v.Field(i)
		out[prefix+name] = f
		if f.Kind() == reflect.Struct && f.Type().PkgPath() == t.PkgPath() {
			defaultValues(f, prefix+name+".", out)
		}
	}
}

// TestConfigReferenceDefaults: the default column of docs/config.md, where
// it gives a value (the first `quoted` word), is the default
// config.Defaults sets; a key whose default is not the zero value gives it.
// Structs, lists and unset pointers (documented in words: "enabled",
// "`[]`") are left out, as is node (the host name, set at parse).
func TestConfigReferenceDefaults(t *testing.T) {
	doc, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	cells := map[string]string{}
	for k, c := range doctable.Rows(string(doc), "") {
		if len(c) > 0 {
			cells[k] = c[0]
		}
	}
	vals := map[string]reflect.Value{}
	defaultValues(reflect.ValueOf(config.Defaults()), "", vals)
	checked := 0
	for k, v := range vals {
		cell, ok := cells[k]
		if !ok || k == "node" {
			continue // TestConfigReferenceComplete reports a missing row
		}
		switch v.Kind() {
		case reflect.Struct, reflect.Slice, reflect.Pointer:
			continue
		}
		word := ""
		if _, after, ok := strings.Cut(cell, "`"); ok {
			word, _, _ = strings.Cut(after, "`")
		}
		if word == "" {
			if !v.IsZero() {
				t.Errorf("docs/config.md: %s: default cell %q names no value; the code's default is %v", k, cell, v.Interface())
			}
			continue
		}
		checked++
		var same bool
		switch x := v.Interface().(type) {
		case time.Duration:
			d, err := time.ParseDuration(word)
			if word == "0" {
				d, err = 0, nil
			}
			same = err == nil && d == x
		case fmt.Stringer: // software.cycles_per_packet: auto
			same = word == x.String()
		case string:
			same = word == x
		case bool:
			same = word == strconv.FormatBool(x)
		default:
			f, err := strconv.ParseFloat(word, 64)
			same = err == nil && f == v.Convert(reflect.TypeOf(float64(0))).Float()
		}
		if !same {
			t.Errorf("docs/config.md: %s defaults to `%s`; config.Defaults sets %v", k, word, v.Interface())
		}
	}
	if checked < 40 {
		t.Fatalf("only %d defaults compared", checked)
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
