package devcheck

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ifreqData is struct ifreq with the ifr_data member of the union
// (include/uapi/linux/if.h): a 16-byte name, then the pointer, padded to
// the union's 24 bytes. The pointer field is a real Go pointer so the
// buffer stays alive and reachable while the kernel writes into it.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

// sysEthtool issues SIOCETHTOOL on fd for ifname with buf as the ethtool
// command structure (its first u32 is the command). The kernel reads and
// writes buf in place.
func sysEthtool(fd int, ifname string, buf []byte) error {
	if len(buf) < 4 {
		return unix.EINVAL
	}
	var ifr ifreqData
	copy(ifr.name[:unix.IFNAMSIZ-1], ifname)
	ifr.data = unsafe.Pointer(&buf[0])
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(buf)
	if e != 0 {
		return e
	}
	return nil
}
