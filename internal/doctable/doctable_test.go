package doctable

import (
	"reflect"
	"testing"
)

func TestRows(t *testing.T) {
	doc := "# page\n\n| key | default | about |\n|---|---|---|\n" +
		"| `a.b` | `5s` | the first |\n" +
		"| `a.c` |  | none |\n" +
		"text with | `a.d` | not a row\n" +
		"| `x_total` | counter |\n" +
		"| `a.b` | `7s` | again |\n"
	got := Rows(doc, "a.")
	want := map[string][]string{"a.b": {"`7s`", "again"}, "a.c": {"", "none"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Rows(a.) = %q, want %q", got, want)
	}
	if got := Rows(doc, ""); len(got) != 3 || !reflect.DeepEqual(got["x_total"], []string{"counter"}) {
		t.Fatalf("Rows() = %q", got)
	}
}
