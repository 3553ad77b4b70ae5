package xdpdryrun

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/internal/testenv"
	"github.com/scrubd/scrubd/swpath/dryrun"
	"github.com/scrubd/scrubd/swpath/rule"
	"github.com/scrubd/scrubd/swpath/traffic"
	"github.com/scrubd/scrubd/swpath/xdp"
)

func capture(t *testing.T, frames [][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := traffic.WritePcap(&buf, frames); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func report(t *testing.T, engine string, set *rule.Set, pcap []byte) (*dryrun.Report, error) {
	t.Helper()
	eng, err := dryrun.NewEngine(engine)
	if err != nil {
		if engine == "xdp" && (errors.Is(err, unix.ENOSYS) || errors.Is(err, ebpf.ErrNotSupported)) {
			// qemu-user (the arm64 pass) does not emulate bpf(2).
			testenv.MissingUnderEmulation(t, "bpf(2) is not usable here: %v", err)
		}
		if os.Geteuid() != 0 && engine == "xdp" {
			if os.Getenv("CI") == "true" {
				t.Fatalf("CI=true but: %v", err)
			}
			t.Skipf("xdp engine needs root: %v", err)
		}
		t.Fatal(err)
	}
	defer eng.Close()
	r, err := traffic.NewReader(bytes.NewReader(pcap))
	if err != nil {
		t.Fatal(err)
	}
	return dryrun.Run(set, eng, r)
}

// TestSameReportAsGo: on generated captures with edge cases (VLAN stacks,
// IPv6 extension chains, fragments, options, truncation, non-IP), the xdp
// engine's dry-run report equals the go engine's, rule by rule.
func TestSameReportAsGo(t *testing.T) {
	type tc struct {
		name string
		set  *rule.Set
	}
	var cases []tc
	for seed := uint64(1); seed <= 6; seed++ {
		cases = append(cases, tc{"random", traffic.RandomRules(seed, []int{5, 40, 200}[seed%3])})
		cases = append(cases, tc{"valid", traffic.RandomValidRules(seed, 60)})
		cases = append(cases, tc{"classbench", traffic.ClassBenchRules(seed, 500)})
	}
	cases = append(cases, tc{"source", traffic.SourceWorkload()})
	refused := 0
	for i, c := range cases {
		frames := traffic.NewGenerator(traffic.Config{Seed: uint64(100 + i), Rules: c.set, RuleFraction: 0.7, Odd: true}).Frames(1500)
		pcap := capture(t, frames)
		want, err := report(t, "go", c.set, pcap)
		if err != nil {
			t.Fatal(err)
		}
		got, err := report(t, "xdp", c.set, pcap)
		var le *xdp.LimitError
		if errors.As(err, &le) {
			refused++
			t.Logf("%s #%d: refused by the XDP limits: %v", c.name, i, err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("%s #%d (%d rules): xdp report differs from go (-go +xdp):\n%s", c.name, i, len(c.set.Rules), d)
		}
		if want.Dropped == 0 || want.Passed == 0 {
			t.Errorf("%s #%d: capture exercises too little: %+v", c.name, i, want)
		}
	}
	if refused > len(cases)/4 {
		t.Fatalf("%d of %d sets refused", refused, len(cases))
	}
}

func TestRegistered(t *testing.T) {
	for _, n := range dryrun.Engines() {
		if n == "xdp" {
			return
		}
	}
	t.Fatalf("engine xdp not registered: %v", dryrun.Engines())
}
