package guest

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/scrubd/scrubd/offload/tcflower"
)

// Kernel replies are printed as "KERNELLAB-CAPTURE <name> <hex datagram>"
// lines; the host test saves them (KERNELLAB_OUT/captures/<name>.hex) and
// offload/tcflower replays committed copies in its unit tests.

// rawExchange sends one netlink request on a fresh NETLINK_ROUTE socket
// with extended ACK enabled and returns every datagram the kernel answers
// until the ACK (or the end of a dump), unparsed.
func rawExchange(t testing.TB, typ, flags uint16, payload []byte) [][]byte {
	t.Helper()
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1); err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		t.Fatal(err)
	}
	const seq = 4242
	msg := make([]byte, 16, 16+len(payload))
	binary.NativeEndian.PutUint32(msg[0:], uint32(16+len(payload)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], flags)
	binary.NativeEndian.PutUint32(msg[8:], seq)
	msg = append(msg, payload...)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	buf := make([]byte, 1<<20)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			t.Fatal(err)
		}
		d := append([]byte(nil), buf[:n]...)
		out = append(out, d)
		// Stop after NLMSG_ERROR (an ACK) or NLMSG_DONE in this datagram.
		for off := 0; off+16 <= len(d); {
			l := int(binary.NativeEndian.Uint32(d[off:]))
			mt := binary.NativeEndian.Uint16(d[off+4:])
			if mt == unix.NLMSG_ERROR || mt == unix.NLMSG_DONE {
				return out
			}
			if l < 16 {
				return out
			}
			off += (l + 3) &^ 3
		}
	}
}

func capture(t testing.TB, name string, dgrams [][]byte) {
	for _, d := range dgrams {
		fmt.Fprintf(os.Stdout, "KERNELLAB-CAPTURE %s %s\n", name, hex.EncodeToString(d))
	}
	t.Logf("captured %d datagrams as %s", len(dgrams), name)
}

// dumpPayload is a tcmsg asking for every filter on ifindex's ingress.
func dumpPayload(ifindex int) []byte {
	b := make([]byte, 20)
	binary.NativeEndian.PutUint32(b[4:], uint32(ifindex))
	binary.NativeEndian.PutUint32(b[12:], tcflower.ParentIngress)
	return b
}

// TestCaptureKernelReplies records real 6.1 replies for offload/tcflower's
// replay tests: a dump of labFilters with stats, an EEXIST error with its
// extack, and the echo of an install.
func TestCaptureKernelReplies(t *testing.T) {
	requireGuest(t)
	c := dial(t)
	ia, _ := vethPair(t, "cap0", "cap1")
	if _, err := c.EnsureQdisc(ia); err != nil {
		t.Fatal(err)
	}
	fs := labFilters(ia)
	for _, f := range fs[1:] {
		if _, err := c.Add(f); err != nil {
			t.Fatal(err)
		}
	}
	first, err := fs[0].MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	capture(t, "install-echo", rawExchange(t, unix.RTM_NEWTFILTER, unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL|unix.NLM_F_ECHO, first))
	capture(t, "install-eexist", rawExchange(t, unix.RTM_NEWTFILTER, unix.NLM_F_REQUEST|unix.NLM_F_ACK|unix.NLM_F_CREATE|unix.NLM_F_EXCL, first))
	capture(t, "dump-lab", rawExchange(t, unix.RTM_GETTFILTER, unix.NLM_F_REQUEST|unix.NLM_F_DUMP, dumpPayload(ia)))
}
