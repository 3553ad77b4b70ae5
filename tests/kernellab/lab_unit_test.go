package kernellab

import (
	"bytes"
	"strings"
	"testing"
)

// TestCpioNewc checks the archive layout the kernel's initramfs unpacker
// expects: magic, 4-byte alignment, parent directories, trailer.
func TestCpioNewc(t *testing.T) {
	r := NewInitramfs()
	r.AddData("/a/b/file", []byte("hello"), 0o644)
	r.AddSymlink("/bin/sh", "busybox")
	var buf bytes.Buffer
	if err := r.Write(&buf); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if len(b)%4 != 0 {
		t.Fatalf("archive length %d not 4-aligned", len(b))
	}
	var names []string
	for off := 0; off < len(b); {
		h := string(b[off : off+110])
		if !strings.HasPrefix(h, "070701") {
			t.Fatalf("bad magic at %d: %q", off, h[:6])
		}
		var fields [13]uint64
		for i := range fields {
			var v uint64
			for _, c := range h[6+8*i : 14+8*i] {
				v <<= 4
				switch {
				case c >= '0' && c <= '9':
					v |= uint64(c - '0')
				case c >= 'a' && c <= 'f':
					v |= uint64(c-'a') + 10
				default:
					t.Fatalf("non-hex header at %d", off)
				}
			}
			fields[i] = v
		}
		mode, size, nameSize := fields[1], fields[6], fields[11]
		name := string(b[off+110 : off+110+int(nameSize)-1])
		names = append(names, name)
		off += 110 + int(nameSize)
		off = (off + 3) &^ 3
		data := b[off : off+int(size)]
		switch name {
		case "a/b/file":
			if string(data) != "hello" || mode != 0o100644 {
				t.Fatalf("file %q mode %o", data, mode)
			}
		case "bin/sh":
			if string(data) != "busybox" || mode != 0o120777 {
				t.Fatalf("link %q mode %o", data, mode)
			}
		}
		off += int(size)
		off = (off + 3) &^ 3
		if name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("data after trailer")
			}
			break
		}
	}
	got := strings.Join(names, ",")
	for _, want := range []string{"a,", "a/b,", "a/b/file", "bin/sh", "proc", "TRAILER!!!"} {
		if !strings.Contains(got, want) {
			t.Fatalf("entries %s lack %s", got, want)
		}
	}
}
