package keygen

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/scrubd/scrubd/swpath/rule"
)

// TestGeneratedFilesCurrent: the committed packers are what rule.MatchFields
// generates now (run go generate in swpath/classifier and offload/sim after
// changing the table).
func TestGeneratedFilesCurrent(t *testing.T) {
	for _, c := range []struct {
		file string
		gen  func([]rule.MatchField) ([]byte, error)
	}{
		{"../../swpath/classifier/cachekey_gen.go", Cache},
		{"../../offload/sim/simkey_gen.go", Sim},
	} {
		want, err := c.gen(rule.MatchFields)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what rule.MatchFields generates; run go generate in its package\ngenerated:\n%s", c.file, want)
		}
	}
}

// TestMemberIsAccessor: the member the packers read is the one the table's
// Get and Set (which the tests use) read and write, bit by bit.
func TestMemberIsAccessor(t *testing.T) {
	for _, mf := range rule.MatchFields {
		for bit := 0; bit < mf.Width; bit++ {
			var f rule.Fields
			hi, lo := uint64(0), uint64(1)<<bit
			if bit >= 64 {
				hi, lo = 1<<(bit-64), 0
			}
			mf.Set(&f, hi, lo)
			v := reflect.ValueOf(f).FieldByName(mf.Member)
			if !v.IsValid() {
				t.Fatalf("%s: Member %q is not in rule.Fields", mf.Name, mf.Member)
			}
			var gh, gl uint64
			switch v.Kind() {
			case reflect.Bool:
				if v.Bool() {
					gl = 1
				}
			case reflect.Struct:
				gh, gl = v.FieldByName("Hi").Uint(), v.FieldByName("Lo").Uint()
			default:
				gl = v.Uint()
			}
			if gh != hi || gl != lo {
				t.Errorf("%s bit %d: Set stores it, member %s reads %#x:%#x", mf.Name, bit, mf.Member, gh, gl)
			}
			if h, l := mf.Get(&f); h != gh || l != gl {
				t.Errorf("%s bit %d: Get reads %#x:%#x, member %s holds %#x:%#x", mf.Name, bit, h, l, mf.Member, gh, gl)
			}
		}
	}
}

// TestBadTable: a table the packers cannot follow is refused, naming the
// field.
func TestBadTable(t *testing.T) {
	edit := func(name string, fn func(*rule.MatchField)) []rule.MatchField {
		fs := append([]rule.MatchField(nil), rule.MatchFields...)
		for i := range fs {
			if fs[i].Name == name {
				fn(&fs[i])
			}
		}
		return fs
	}
	for _, c := range []struct {
		fields []rule.MatchField
		gen    func([]rule.MatchField) ([]byte, error)
		want   string
	}{
		{edit("dscp", func(m *rule.MatchField) { m.CacheKey = [6]uint64{0x3f << 40} }), Cache, "tcp_flags: CacheKey word 0 bits 40-47 overlap dscp"},
		{edit("dscp", func(m *rule.MatchField) { m.Member = "Tos" }), Cache, `dscp: Member "Tos"`},
		{edit("src_port", func(m *rule.MatchField) { m.CacheKey = [6]uint64{1: 0x1ffff} }), Cache, "src_port: CacheKey"},
		{edit("dscp", func(m *rule.MatchField) { m.SimMember = "" }), Sim, "dscp: SimKey"},
		{edit("dscp", func(m *rule.MatchField) { m.CacheKey = [6]uint64{0x3e << 32} }), Cache, "dscp: CacheKey [0x3e00000000 0x0 0x0 0x0 0x0 0x0]: the key must hold the field's 6 bits"},
		{edit("dscp", func(m *rule.MatchField) { m.SimKey = [6]uint64{4: 0xf4} }), Sim, "dscp: SimKey"},
		{edit("fragment", func(m *rule.MatchField) { m.SimKey = [6]uint64{4: 0xff} }), Sim, "dscp: SimKey word 4 bits 0-7 overlap fragment"},
	} {
		_, err := c.gen(c.fields)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err %v, want one containing %q", err, c.want)
		}
	}
}
