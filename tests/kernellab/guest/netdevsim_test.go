package guest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/offload/devcheck"
	"github.com/scrubd/scrubd/offload/nlerr"
	"github.com/scrubd/scrubd/offload/tcflower"
)

const nsimExtack = "only offload of BPF classifiers supported"

func requireNetdevsim(t *testing.T) {
	t.Helper()
	requireGuest(t)
	if os.Getenv("KERNELLAB_NETDEVSIM") == "1" {
		return
	}
	reason := os.Getenv("KERNELLAB_NETDEVSIM_MISSING")
	if os.Getenv("CI") == "true" {
		t.Fatalf("netdevsim.ko not in the lab: %s", reason)
	}
	t.Skipf("netdevsim.ko not built: %s", reason)
}

// nsimPorts creates netdevsim device id with one port and returns its
// netdev names after waiting for them to appear.
func nsimNetdevs(t *testing.T, id string) []string {
	t.Helper()
	dir := "/sys/bus/netdevsim/devices/netdevsim" + id + "/net"
	deadline := time.Now().Add(5 * time.Second)
	for {
		ents, _ := os.ReadDir(dir)
		if len(ents) > 0 {
			var out []string
			for _, e := range ents {
				out = append(out, e.Name())
			}
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("no netdev under %s", dir)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func writeSys(t *testing.T, path, v string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(v), 0o200); err != nil {
		t.Fatalf("write %q to %s: %v", v, path, err)
	}
}

func ifindexOf(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/class/net", name, "ifindex"))
	if err != nil {
		t.Fatal(err)
	}
	var i int
	for _, c := range strings.TrimSpace(string(b)) {
		i = i*10 + int(c-'0')
	}
	return i
}

func TestNetdevsimOffloadRefusedAndDevlink(t *testing.T) {
	requireNetdevsim(t)
	writeSys(t, "/sys/bus/netdevsim/new_device", "10 1")
	t.Cleanup(func() { _ = os.WriteFile("/sys/bus/netdevsim/del_device", []byte("10"), 0o200) })
	pf := nsimNetdevs(t, "10")[0]
	pfIdx := ifindexOf(t, pf)

	// ethtool: hw-tc-offload exists, is changeable, goes on.
	e, err := devcheck.OpenEthtool()
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	hw, err := e.HWTCOffload(pf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s hw-tc-offload before: %+v", pf, hw)
	if !hw.Available {
		t.Fatalf("netdevsim hw-tc-offload is fixed: %+v", hw)
	}
	if hw, err = e.SetFeature(pf, devcheck.HWTCOffloadFeature, true); err != nil || !hw.Active {
		t.Fatalf("enable hw-tc-offload: %+v %v", hw, err)
	}
	st, err := e.Stats(pf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s ethtool stats: %d counters, drop counters %v", pf, len(st), devcheck.DropCounters(st))

	// devlink: device, port, eswitch mode, params.
	d, err := devcheck.DialDevlink()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	dev, err := d.DeviceOf(pf)
	if err != nil || dev != (devcheck.Device{Bus: "netdevsim", Name: "netdevsim10"}) {
		t.Fatalf("DeviceOf(%s) = %v, %v", pf, dev, err)
	}
	mode, err := d.EswitchMode(dev)
	if err != nil || mode != devcheck.Legacy {
		t.Fatalf("eswitch mode = %v, %v; want legacy", mode, err)
	}
	ps, err := d.Params(dev)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("devlink params of %s: %+v", dev, ps)
	mm, err := d.Param(dev, "max_macs")
	if err != nil || mm.Values[devcheck.CmodeDriverinit] != uint32(32) || !mm.Generic {
		t.Fatalf("max_macs = %+v, %v", mm, err)
	}
	t1, err := d.Param(dev, "test1")
	if err != nil || t1.Values[devcheck.CmodeDriverinit] != true {
		t.Fatalf("test1 = %+v, %v", t1, err)
	}
	if _, err := d.FlowSteeringMode(dev); !errors.Is(err, devcheck.ErrParamNotFound) {
		t.Fatalf("flow_steering_mode on netdevsim: %v, want ErrParamNotFound", err)
	}

	// tc: skip_sw flower is refused by the driver with an extack.
	c := dial(t)
	if _, err := c.EnsureQdisc(pfIdx); err != nil {
		t.Fatal(err)
	}
	f := labFilters(pfIdx)[1]
	f.Flags = tcflower.SkipSW
	_, err = c.Add(f)
	var ne *nlerr.Error
	if !errors.As(err, &ne) {
		t.Fatalf("skip_sw on netdevsim: %v, want *nlerr.Error", err)
	}
	t.Logf("skip_sw on %s: %v", pf, err)
	if ne.Errno != unix.EOPNOTSUPP || !strings.Contains(ne.Extack, nsimExtack) || !nlerr.IsUnsupported(err) || ne.Dev != pf || ne.Op != "install" {
		t.Fatalf("skip_sw error %+v: want EOPNOTSUPP with extack %q", ne, nsimExtack)
	}
	raw, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	capture(t, "netdevsim-skipsw", rawExchange(t, unix.RTM_NEWTFILTER, unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL, raw))
	// Fallback to the software path: the same rule with skip_hw is accepted.
	f.Flags = tcflower.SkipHW
	if _, err := c.Add(f); err != nil {
		t.Fatalf("software fallback: %v", err)
	}
	// No flag: the driver refuses silently, the rule lands in software only.
	g := labFilters(pfIdx)[2]
	g.Flags = 0
	if _, err := c.Add(g); err != nil {
		t.Fatal(err)
	}
	// verbose: the driver's refusal comes back as a warning on a success ACK.
	v := labFilters(pfIdx)[3]
	v.Flags = tcflower.Verbose
	vraw := v
	vraw.Handle, vraw.Prio = 77, 40
	if raw, err = vraw.MarshalBinary(); err != nil {
		t.Fatal(err)
	}
	capture(t, "netdevsim-verbose-warning", rawExchange(t, unix.RTM_NEWTFILTER, unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL, raw))
	r := c.Batch([]tcflower.Op{{Kind: tcflower.OpAdd, Filter: v}}, tcflower.BatchOptions{})[0]
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	t.Logf("verbose install warning: %q", r.Warning)
	if !strings.Contains(r.Warning, nsimExtack) {
		t.Fatalf("verbose warning %q, want the driver's %q", r.Warning, nsimExtack)
	}
	fs, err := c.Dump(tcflower.DumpQuery{Ifindex: pfIdx, AllChain: true})
	if err != nil || len(fs) != 4 {
		t.Fatalf("dump = %d filters, %v; want 4 (skip_hw, no flag, verbose twice)", len(fs), err)
	}
	for _, x := range fs {
		if x.Flags&tcflower.NotInHW == 0 || x.Flags&tcflower.InHW != 0 || x.InHWCount != 0 {
			t.Fatalf("%s flags %v in_hw_count %d: want not_in_hw", x.ID(), x.Flags, x.InHWCount)
		}
		t.Logf("%s: flags %v in_hw_count %d", x.ID(), x.Flags, x.InHWCount)
	}

	// switchdev with two VFs: representors appear; skip_sw is refused there too.
	writeSys(t, "/sys/bus/netdevsim/devices/netdevsim10/sriov_numvfs", "2")
	if err := d.SetEswitchMode(dev, devcheck.Switchdev); err != nil {
		t.Fatal(err)
	}
	if mode, err := d.EswitchMode(dev); err != nil || mode != devcheck.Switchdev {
		t.Fatalf("after set: %v %v", mode, err)
	}
	ports, err := d.Ports()
	if err != nil {
		t.Fatal(err)
	}
	var reps []devcheck.Port
	for _, p := range ports {
		if p.Device == dev && p.Netdev != pf && p.Netdev != "" {
			reps = append(reps, p)
		}
	}
	if len(reps) != 2 {
		t.Fatalf("switchdev ports %+v: want 2 VF representors", ports)
	}
	rep := int(reps[0].Ifindex)
	if _, err := c.EnsureQdisc(rep); err != nil {
		t.Fatal(err)
	}
	f.Ifindex, f.Flags = rep, tcflower.SkipSW
	_, err = c.Add(f)
	if !errors.As(err, &ne) || !strings.Contains(ne.Extack, nsimExtack) || ne.Errno != unix.EOPNOTSUPP {
		t.Fatalf("skip_sw on representor %s: %v", reps[0].Netdev, err)
	}
	if err := d.SetEswitchMode(dev, devcheck.Legacy); err != nil {
		t.Fatal(err)
	}
}
