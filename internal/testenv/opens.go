package testenv

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// WatchOpens asks the kernel to count the opens of the file at path
// (inotify(7), IN_OPEN) from now on, and returns a function that reports
// how many happened since the previous call (the first call: since the
// watch began). The watch ends with the test.
func WatchOpens(t testing.TB, path string) (opens func() int) {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatalf("inotify_init1: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	// IN_CLOSE_NOWRITE too: the kernel merges an event with the unread one
	// before it when the two are the same (inotify(7)), so two opens in a
	// row would count as one without the close between them.
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_OPEN|unix.IN_CLOSE_NOWRITE); err != nil {
		t.Fatalf("inotify_add_watch %s: %v", path, err)
	}
	buf := make([]byte, 64<<10)
	return func() int {
		t.Helper()
		n := 0
		for {
			got, err := unix.Read(fd, buf)
			if err == unix.EAGAIN || got <= 0 {
				return n
			}
			if err != nil {
				t.Fatalf("reading inotify events: %v", err)
			}
			for off := 0; off+unix.SizeofInotifyEvent <= got; {
				// struct inotify_event: wd, mask, cookie, len (32 bits
				// each), then len bytes of name.
				mask := binary.NativeEndian.Uint32(buf[off+4:])
				nameLen := binary.NativeEndian.Uint32(buf[off+12:])
				if mask&unix.IN_OPEN != 0 {
					n++
				}
				off += unix.SizeofInotifyEvent + int(nameLen)
			}
		}
	}
}
