package netdev

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/internal/testenv"
)

// ipLink is what `ip -j link show` prints of a device (iproute2's JSON).
type ipLink struct {
	Ifindex   int      `json:"ifindex"`
	Ifname    string   `json:"ifname"`
	MTU       int      `json:"mtu"`
	Operstate string   `json:"operstate"`
	Flags     []string `json:"flags"`
	LinkInfo  struct {
		InfoKind string `json:"info_kind"`
	} `json:"linkinfo"`
}

// ipOperState maps iproute2's operstate names (if_operstate_str in
// ip/ipaddress.c, the RFC 2863 states in upper case) to this package's.
var ipOperState = map[string]string{
	"UNKNOWN": "unknown", "NOTPRESENT": "not-present", "DOWN": "down",
	"LOWERLAYERDOWN": "lower-layer-down", "TESTING": "testing", "DORMANT": "dormant", "UP": "up",
}

func ip(t *testing.T, ns string, args ...string) []byte {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip -n %s %s: %v\n%s", ns, strings.Join(args, " "), err, out)
	}
	return out
}

// showLink reads a device back with iproute2, the reference for what the
// kernel holds.
func showLink(t *testing.T, ns, dev string) ipLink {
	t.Helper()
	var ls []ipLink
	if err := json.Unmarshal(ip(t, ns, "-j", "-d", "link", "show", "dev", dev), &ls); err != nil || len(ls) != 1 {
		t.Fatalf("ip -j link show %s: %d links, %v", dev, len(ls), err)
	}
	return ls[0]
}

func lookup(t *testing.T, ns *testenv.NetNS, name string) (Link, error) {
	t.Helper()
	var l Link
	var err error
	if derr := ns.Do(func() error { l, err = ByName(name); return nil }); derr != nil {
		t.Fatal(derr)
	}
	return l, err
}

func lookupIndex(t *testing.T, ns *testenv.NetNS, index int) (Link, error) {
	t.Helper()
	var l Link
	var err error
	if derr := ns.Do(func() error { l, err = ByIndex(index); return nil }); derr != nil {
		t.Fatal(derr)
	}
	return l, err
}

// A veth pair in a fresh namespace, looked up by name, alternative name and
// index, against what iproute2 reads of the same devices; the state follows
// the peer going up.
func TestLookupReadsKernelState(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		testenv.Missing(t, "iproute2 (ip) not installed: %v", err)
	}
	ns := testenv.NewNetNS(t)
	ip(t, ns.Name, "link", "add", "nd0", "mtu", "1400", "type", "veth", "peer", "name", "nd1")
	ip(t, ns.Name, "link", "set", "nd0", "up")

	check := func(step string, got Link, want ipLink) {
		t.Helper()
		adminUp := false
		for _, f := range want.Flags {
			adminUp = adminUp || f == "UP"
		}
		w := Link{Index: want.Ifindex, Name: want.Ifname, Kind: want.LinkInfo.InfoKind, MTU: want.MTU, AdminUp: adminUp, OperState: ipOperState[want.Operstate]}
		if w.Kind == "" {
			w.Kind = "loopback"
		}
		if got != w {
			t.Fatalf("%s: got %+v, ip link shows %+v", step, got, w)
		}
	}

	// nd0 up, its peer down: no carrier (RFC 2863 lowerLayerDown).
	want := showLink(t, ns.Name, "nd0")
	if want.Operstate != "LOWERLAYERDOWN" || want.MTU != 1400 {
		t.Fatalf("set-up check: ip shows %+v", want)
	}
	got, err := lookup(t, ns, "nd0")
	if err != nil {
		t.Fatal(err)
	}
	check("nd0, peer down", got, want)
	if got.Running() {
		t.Fatalf("%+v running with its peer down", got)
	}
	byIndex, err := lookupIndex(t, ns, want.Ifindex)
	if err != nil || byIndex != got {
		t.Fatalf("ByIndex(%d) = %+v, %v; ByName gave %+v", want.Ifindex, byIndex, err, got)
	}

	ip(t, ns.Name, "link", "set", "nd1", "up")
	want = showLink(t, ns.Name, "nd0")
	got, err = lookup(t, ns, "nd0")
	if err != nil {
		t.Fatal(err)
	}
	check("nd0, peer up", got, want)
	if got.OperState != "up" || !got.Running() {
		t.Fatalf("%+v: want up and running with the peer up", got)
	}

	// lo is down in a new namespace; its state is not tracked ("unknown").
	lo, err := lookup(t, ns, "lo")
	if err != nil {
		t.Fatal(err)
	}
	check("lo", lo, showLink(t, ns.Name, "lo"))

	// A name longer than 15 bytes is found as an alternative name.
	const alt = "scrubd-uplink-alt0"
	ip(t, ns.Name, "link", "property", "add", "dev", "nd0", "altname", alt)
	got, err = lookup(t, ns, alt)
	if err != nil || got.Name != "nd0" || got.Index != want.Ifindex {
		t.Fatalf("ByName(%q) = %+v, %v; want nd0 (ifindex %d)", alt, got, err, want.Ifindex)
	}

	var name, missing string
	if err := ns.Do(func() error { name, missing = Name(want.Ifindex), Name(want.Ifindex+1000); return nil }); err != nil {
		t.Fatal(err)
	}
	if name != "nd0" || missing != "ifindex "+strconv.Itoa(want.Ifindex+1000) {
		t.Fatalf("Name = %q, %q", name, missing)
	}
}

// Devices that are not there, and input that cannot name one: errors
// that name the device or the value.
func TestLookupErrors(t *testing.T) {
	if _, err := exec.LookPath("ip"); err != nil {
		testenv.Missing(t, "iproute2 (ip) not installed: %v", err)
	}
	ns := testenv.NewNetNS(t)
	_, err := lookup(t, ns, "nope0")
	if !errors.Is(err, unix.ENODEV) || !strings.Contains(err.Error(), `"nope0"`) {
		t.Fatalf("ByName(nope0) = %v; want ENODEV naming the device", err)
	}
	_, err = lookupIndex(t, ns, 4242)
	if !errors.Is(err, unix.ENODEV) || !strings.Contains(err.Error(), "4242") {
		t.Fatalf("ByIndex(4242) = %v; want ENODEV naming the index", err)
	}
	if _, err := ByName(""); err == nil || !strings.Contains(err.Error(), "empty device name") {
		t.Fatalf("ByName(\"\") = %v", err)
	}
	if _, err := ByIndex(-3); err == nil || !strings.Contains(err.Error(), "-3") {
		t.Fatalf("ByIndex(-3) = %v", err)
	}
}
