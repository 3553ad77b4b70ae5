package devcheck

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"regexp"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/offload/nlerr"
)

// String sets and sizes from include/uapi/linux/ethtool.h.
const (
	ethSSStats    = 1 // ETH_SS_STATS
	ethSSFeatures = 4 // ETH_SS_FEATURES
	gstringLen    = 32
	maxGstrings   = 1 << 15 // refuse absurd counts from a driver
)

// ioctlFunc runs one ethtool command for ifname on buf (tests fake it).
type ioctlFunc func(ifname string, buf []byte) error

// Ethtool issues ethtool ioctls on one socket.
type Ethtool struct {
	fd    int
	ioctl ioctlFunc
}

// OpenEthtool opens the AF_INET datagram socket the ioctls go through.
func OpenEthtool() (*Ethtool, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("devcheck: ethtool socket: %w", err)
	}
	e := &Ethtool{fd: fd}
	e.ioctl = func(ifname string, buf []byte) error { return sysEthtool(fd, ifname, buf) }
	return e, nil
}

// Close closes the socket.
func (e *Ethtool) Close() error {
	if e.fd <= 0 {
		return nil
	}
	return unix.Close(e.fd)
}

func ne(op, dev string, err error) error {
	return nlerr.Wrap("ethtool "+op, dev, "", err)
}

// setCount returns how many strings the driver has in set ss
// (ETHTOOL_GSSET_INFO).
func (e *Ethtool) setCount(ifname string, ss uint32) (int, error) {
	// struct ethtool_sset_info { u32 cmd; u32 reserved; u64 sset_mask; u32 data[]; }
	buf := make([]byte, 16+4)
	binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_GSSET_INFO)
	binary.NativeEndian.PutUint64(buf[8:], 1<<ss)
	if err := e.ioctl(ifname, buf); err != nil {
		return 0, ne("GSSET_INFO", ifname, err)
	}
	if binary.NativeEndian.Uint64(buf[8:])&(1<<ss) == 0 {
		return 0, nil
	}
	n := int(binary.NativeEndian.Uint32(buf[16:]))
	if n < 0 || n > maxGstrings {
		return 0, ne("GSSET_INFO", ifname, fmt.Errorf("driver reports %d strings", n))
	}
	return n, nil
}

// ETHTOOL_GSTRINGS and ETHTOOL_GSTATS name a count, and the kernel returns
// the count it used. Older kernels (6.1: net/ethtool/ioctl.c,
// ethtool_get_strings and ethtool_get_stats) write as many entries as the
// driver counts at that moment whatever the request says, so a count that
// grows after ETHTOOL_GSSET_INFO (mlx5 adds per-channel counters when
// channels are added) would be written past a buffer sized by the first
// count; newer ones (6.18 here) answer a count that differs from the
// driver's with no entries. So both buffers hold maxGstrings entries (1 MiB
// of names, 256 KiB of values; pooled), the request carries the count of
// ETHTOOL_GSSET_INFO, and a reply with another count means "read again".
var (
	gstringsBufs = sync.Pool{New: func() any { return new([12 + maxGstrings*gstringLen]byte) }}
	gstatsBufs   = sync.Pool{New: func() any { return new([8 + maxGstrings*8]byte) }}
)

// stringsOf asks for the n names of string set ss (ETHTOOL_GSTRINGS) and
// returns as many as the kernel sent.
func (e *Ethtool) stringsOf(ifname string, ss uint32, n int) ([]string, error) {
	// struct ethtool_gstrings { u32 cmd; u32 string_set; u32 len; u8 data[]; }
	b := gstringsBufs.Get().(*[12 + maxGstrings*gstringLen]byte)
	defer gstringsBufs.Put(b)
	buf := b[:]
	binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_GSTRINGS)
	binary.NativeEndian.PutUint32(buf[4:], ss)
	binary.NativeEndian.PutUint32(buf[8:], uint32(n))
	if err := e.ioctl(ifname, buf); err != nil {
		return nil, ne("GSTRINGS", ifname, err)
	}
	got := int(binary.NativeEndian.Uint32(buf[8:]))
	if got > maxGstrings {
		return nil, ne("GSTRINGS", ifname, fmt.Errorf("driver sent %d strings, more than %d", got, maxGstrings))
	}
	out := make([]string, got)
	for i := range out {
		out[i] = cstring(buf[12+i*gstringLen : 12+(i+1)*gstringLen])
	}
	return out, nil
}

// cstring is the NUL-terminated string at the start of b (all of b when
// it has no NUL).
func cstring(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// statsReads is how often Stats reads count, names and values again when
// the driver's count changed between them.
const statsReads = 3

// Stats returns the driver's statistics by name, as ethtool -S shows them
// (ETHTOOL_GSSET_INFO, ETHTOOL_GSTRINGS of ETH_SS_STATS, then
// ETHTOOL_GSTATS). A device without statistics returns an empty map. When
// the driver's count changes between the calls, all three are made again.
func (e *Ethtool) Stats(ifname string) (map[string]uint64, error) {
	b := gstatsBufs.Get().(*[8 + maxGstrings*8]byte)
	defer gstatsBufs.Put(b)
	buf := b[:]
	for range statsReads {
		n, err := e.setCount(ifname, ethSSStats)
		if err != nil || n == 0 {
			return map[string]uint64{}, err
		}
		names, err := e.stringsOf(ifname, ethSSStats, n)
		if err != nil {
			return nil, err
		}
		if len(names) != n {
			continue
		}
		// struct ethtool_stats { u32 cmd; u32 n_stats; u64 data[]; }
		binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_GSTATS)
		binary.NativeEndian.PutUint32(buf[4:], uint32(n))
		if err := e.ioctl(ifname, buf); err != nil {
			return nil, ne("GSTATS", ifname, err)
		}
		if got := int(binary.NativeEndian.Uint32(buf[4:])); got != n {
			continue
		}
		out := make(map[string]uint64, n)
		for i, name := range names {
			out[name] = binary.NativeEndian.Uint64(buf[8+8*i:])
		}
		return out, nil
	}
	return nil, ne("GSTATS", ifname, fmt.Errorf("the driver's statistics count changed during each of %d reads", statsReads))
}

// DriverInfo is what ETHTOOL_GDRVINFO reports of a device's driver
// (ethtool -i).
type DriverInfo struct {
	Driver    string // "mlx5_core", "veth", ...
	Version   string
	FwVersion string // firmware version, "" where the driver has none
	BusInfo   string // PCI address of the function, "" for virtual devices
	NStats    int    // ETH_SS_STATS count (ethtool -S lines)
}

// DriverInfo reads the device's driver information (ETHTOOL_GDRVINFO).
func (e *Ethtool) DriverInfo(ifname string) (DriverInfo, error) {
	// struct ethtool_drvinfo { u32 cmd; char driver[32], version[32],
	// fw_version[32], bus_info[32], erom_version[32], reserved2[12];
	// u32 n_priv_flags, n_stats, testinfo_len, eedump_len, regdump_len; }
	const strLen, nStatsOff, size = 32, 4 + 5*32 + 12 + 4, 4 + 5*32 + 12 + 5*4
	buf := make([]byte, size)
	binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_GDRVINFO)
	if err := e.ioctl(ifname, buf); err != nil {
		return DriverInfo{}, ne("GDRVINFO", ifname, err)
	}
	str := func(i int) string { return cstring(buf[4+i*strLen : 4+(i+1)*strLen]) }
	return DriverInfo{Driver: str(0), Version: str(1), FwVersion: str(2), BusInfo: str(3),
		NStats: int(binary.NativeEndian.Uint32(buf[nStatsOff:]))}, nil
}

// dropCounter matches the NIC counters that count packets the NIC or
// driver dropped (mlx5 counters.rst names; generic rx_dropped/rx_drops).
var dropCounter = regexp.MustCompile(`^(rx_discards_phy|rx_out_of_buffer|rx_buffer_passed_thres_phy|rx_steer_missed_packets|` +
	`rx_vport_out_of_buffer|dev_internal_queue_oob|rx_prio\d+_discards|rx\d*_xdp_drop|rx_xdp_drop|rx_wqe_err|rx_dropped|rx_drops|` +
	`rx_queue_\d+_drops)$`)

// DropCounters picks the drop counters out of stats (see Stats).
func DropCounters(stats map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range stats {
		if dropCounter.MatchString(k) {
			out[k] = v
		}
	}
	return out
}

// Feature is one netdev feature as ETHTOOL_GFEATURES reports it.
type Feature struct {
	Name         string
	Available    bool // the driver lets it be changed (not "[fixed]")
	Requested    bool
	Active       bool
	NeverChanged bool
}

// featureNames returns the names of the netdev features (ETH_SS_FEATURES).
func (e *Ethtool) featureNames(ifname string) ([]string, error) {
	n, err := e.setCount(ifname, ethSSFeatures)
	if err != nil || n == 0 {
		return nil, err
	}
	return e.stringsOf(ifname, ethSSFeatures, n)
}

// Features returns every netdev feature of the device by name (ethtool -k).
func (e *Ethtool) Features(ifname string) (map[string]Feature, error) {
	names, err := e.featureNames(ifname)
	if err != nil {
		return nil, err
	}
	blocks := (len(names) + 31) / 32
	// struct ethtool_gfeatures { u32 cmd; u32 size; struct { u32 available,
	// requested, active, never_changed; } features[size]; }
	buf := make([]byte, 8+16*blocks)
	binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_GFEATURES)
	binary.NativeEndian.PutUint32(buf[4:], uint32(blocks))
	if err := e.ioctl(ifname, buf); err != nil {
		return nil, ne("GFEATURES", ifname, err)
	}
	out := make(map[string]Feature, len(names))
	for i, name := range names {
		if name == "" {
			continue
		}
		b := 8 + 16*(i/32)
		bit := uint32(1) << (i % 32)
		get := func(o int) bool { return binary.NativeEndian.Uint32(buf[b+o:])&bit != 0 }
		out[name] = Feature{Name: name, Available: get(0), Requested: get(4), Active: get(8), NeverChanged: get(12)}
	}
	return out, nil
}

// HWTCOffloadFeature is the feature that gates tc flower offload
// (NETIF_F_HW_TC).
const HWTCOffloadFeature = "hw-tc-offload"

// HWTCOffload returns the hw-tc-offload feature of the device.
func (e *Ethtool) HWTCOffload(ifname string) (Feature, error) {
	fs, err := e.Features(ifname)
	if err != nil {
		return Feature{}, err
	}
	f, ok := fs[HWTCOffloadFeature]
	if !ok {
		return Feature{}, ne("GFEATURES", ifname, fmt.Errorf("kernel lists no %q feature", HWTCOffloadFeature))
	}
	return f, nil
}

// SetFeature turns one feature on or off (ETHTOOL_SFEATURES) and reads it
// back; it fails when the feature is fixed or the driver did not apply it.
func (e *Ethtool) SetFeature(ifname, name string, on bool) (Feature, error) {
	names, err := e.featureNames(ifname)
	if err != nil {
		return Feature{}, err
	}
	idx := -1
	for i, s := range names {
		if s == name {
			idx = i
			break
		}
	}
	if idx < 0 {
		return Feature{}, ne("SFEATURES", ifname, fmt.Errorf("no feature %q", name))
	}
	blocks := (len(names) + 31) / 32
	// struct ethtool_sfeatures { u32 cmd; u32 size; struct { u32 valid, requested; } features[size]; }
	buf := make([]byte, 8+8*blocks)
	binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_SFEATURES)
	binary.NativeEndian.PutUint32(buf[4:], uint32(blocks))
	b := 8 + 8*(idx/32)
	bit := uint32(1) << (idx % 32)
	binary.NativeEndian.PutUint32(buf[b:], bit)
	if on {
		binary.NativeEndian.PutUint32(buf[b+4:], bit)
	}
	if err := e.ioctl(ifname, buf); err != nil {
		return Feature{}, ne("SFEATURES "+name, ifname, err)
	}
	fs, err := e.Features(ifname)
	if err != nil {
		return Feature{}, err
	}
	f := fs[name]
	if f.Active != on {
		return f, ne("SFEATURES "+name, ifname, fmt.Errorf("feature still %v after setting %v (available=%v)", f.Active, on, f.Available))
	}
	return f, nil
}
