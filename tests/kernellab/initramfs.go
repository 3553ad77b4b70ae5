package kernellab

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// cpioWriter writes the "newc" cpio format the kernel unpacks as an
// initramfs (Documentation/driver-api/early-userspace/buffer-format.rst):
// a 110-byte ASCII header per entry, name and data each padded to 4 bytes,
// ended by a TRAILER!!! entry. Uncompressed: the kernel needs no
// decompressor and packing is instant.
type cpioWriter struct {
	w   *bufio.Writer
	ino uint32
	off int64
	err error
}

func (c *cpioWriter) entry(name string, mode uint32, data []byte) {
	if c.err != nil {
		return
	}
	c.ino++
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		c.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name)+1, 0)
	c.write([]byte(hdr))
	c.write([]byte(name))
	c.write([]byte{0})
	c.pad()
	c.write(data)
	c.pad()
}

func (c *cpioWriter) write(b []byte) {
	if c.err != nil {
		return
	}
	n, err := c.w.Write(b)
	c.off += int64(n)
	c.err = err
}

func (c *cpioWriter) pad() {
	if r := c.off % 4; r != 0 {
		c.write(make([]byte, 4-r))
	}
}

const (
	modeDir  = 0o040000
	modeFile = 0o100000
	modeLink = 0o120000
)

// Initramfs is the content of the guest's root file system: file paths in
// the guest mapped to host files or literal contents.
type Initramfs struct {
	files map[string]fileSpec
}

type fileSpec struct {
	host string // copy this host file
	data []byte // or these bytes
	link string // or a symlink to this
	mode uint32 // permission bits
}

// NewInitramfs returns an empty root.
func NewInitramfs() *Initramfs { return &Initramfs{files: map[string]fileSpec{}} }

// AddFile copies host file src to guest path dst (mode of src).
func (r *Initramfs) AddFile(dst, src string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	r.files[path.Clean("/"+dst)] = fileSpec{host: src, mode: uint32(st.Mode().Perm())}
	return nil
}

// AddData adds a file with the given contents and permissions.
func (r *Initramfs) AddData(dst string, data []byte, perm uint32) {
	r.files[path.Clean("/"+dst)] = fileSpec{data: data, mode: perm}
}

// AddSymlink adds a symbolic link dst -> target.
func (r *Initramfs) AddSymlink(dst, target string) {
	r.files[path.Clean("/"+dst)] = fileSpec{link: target, mode: 0o777}
}

// AddBinaryWithLibs adds an ELF executable and every shared library ldd
// lists for it, at their host paths.
func (r *Initramfs) AddBinaryWithLibs(ctx context.Context, bin string) error {
	if err := r.AddFile(bin, bin); err != nil {
		return err
	}
	out, err := run(ctx, "", "ldd", bin)
	if err != nil {
		if strings.Contains(out, "not a dynamic executable") {
			return nil
		}
		return err
	}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		var lib string
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			lib = f[2]
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			lib = f[0]
		}
		if lib == "" {
			continue
		}
		real, err := filepath.EvalSymlinks(lib)
		if err != nil {
			return err
		}
		if err := r.AddFile(lib, real); err != nil {
			return err
		}
	}
	return nil
}

// Write writes the cpio archive, creating parent directories.
func (r *Initramfs) Write(w io.Writer) error {
	dirs := map[string]bool{}
	for p := range r.files {
		for d := path.Dir(p); d != "/" && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range []string{"/proc", "/sys", "/dev", "/tmp", "/run", "/sbin", "/usr/bin", "/usr/sbin"} {
		dirs[d] = true
	}
	var names []string
	for d := range dirs {
		names = append(names, d)
	}
	sort.Strings(names)
	bw := bufio.NewWriterSize(w, 1<<20)
	c := &cpioWriter{w: bw}
	for _, d := range names {
		c.entry(strings.TrimPrefix(d, "/"), modeDir|0o755, nil)
	}
	names = names[:0]
	for p := range r.files {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		f := r.files[p]
		name := strings.TrimPrefix(p, "/")
		switch {
		case f.link != "":
			c.entry(name, modeLink|0o777, []byte(f.link))
		case f.host != "":
			b, err := os.ReadFile(f.host)
			if err != nil {
				return err
			}
			c.entry(name, modeFile|f.mode, b)
		default:
			c.entry(name, modeFile|f.mode, f.data)
		}
	}
	c.entry("TRAILER!!!", 0, nil)
	if c.err != nil {
		return c.err
	}
	return bw.Flush()
}
