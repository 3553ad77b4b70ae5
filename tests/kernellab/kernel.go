package kernellab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Kernel is an unpacked kernel package: a vmlinuz and its module tree.
type Kernel struct {
	Release string // e.g. 6.1.0-57-amd64
	Vmlinuz string
	Modules string // .../lib/modules/<Release>
	Version string // Debian package version, e.g. 6.1.192-3
}

// Config says where the lab keeps its downloads and builds.
type Config struct {
	// CacheDir holds downloaded .debs, unpacked kernels and netdevsim.ko.
	CacheDir string
	// Log receives progress lines (nil: discarded).
	Log func(format string, args ...any)
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		c.Log(format, args...)
	}
}

func run(ctx context.Context, dir string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(out.String(), 2000))
	}
	return out.String(), nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// KernelPackage resolves the linux-image-<release> package that Debian's
// linux-image-amd64 metapackage depends on, and its version.
func KernelPackage(ctx context.Context) (pkg, release, version string, err error) {
	out, err := run(ctx, "", "apt-cache", "depends", "linux-image-amd64")
	if err != nil {
		return "", "", "", err
	}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if p, ok := strings.CutPrefix(l, "Depends: linux-image-"); ok && !strings.Contains(p, " ") {
			pkg, release = "linux-image-"+p, p
			break
		}
	}
	if pkg == "" {
		return "", "", "", fmt.Errorf("apt-cache depends linux-image-amd64: no linux-image-* dependency in:\n%s", out)
	}
	out, err = run(ctx, "", "apt-cache", "policy", pkg)
	if err != nil {
		return "", "", "", err
	}
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "Candidate: "); ok {
			version = v
		}
	}
	return pkg, release, version, nil
}

// Lock takes an exclusive lock on the cache directory (several go test
// runs may share it) and returns its release function.
func (c *Config) Lock() (func(), error) {
	f, err := os.OpenFile(filepath.Join(c.CacheDir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

// FetchKernel returns the unpacked kernel, downloading and unpacking it
// into the cache when it is not there yet (apt-get download; dpkg-deb -x;
// depmod -b). The host's own /boot and /lib/modules are never touched.
func FetchKernel(ctx context.Context, cfg *Config) (*Kernel, error) {
	pkg, rel, ver, err := KernelPackage(ctx)
	if err != nil {
		return nil, err
	}
	tree := filepath.Join(cfg.CacheDir, rel, "tree")
	k := &Kernel{
		Release: rel, Version: ver,
		Vmlinuz: filepath.Join(tree, "boot", "vmlinuz-"+rel),
		Modules: filepath.Join(tree, "lib", "modules", rel),
	}
	if _, err := os.Stat(filepath.Join(k.Modules, "modules.dep")); err == nil {
		if _, err := os.Stat(k.Vmlinuz); err == nil {
			cfg.logf("kernel %s (%s) from cache %s", rel, ver, tree)
			return k, nil
		}
	}
	dl := filepath.Join(cfg.CacheDir, rel, "deb")
	if err := os.MkdirAll(dl, 0o755); err != nil {
		return nil, err
	}
	start := time.Now()
	if _, err := run(ctx, dl, "apt-get", "download", pkg); err != nil {
		return nil, err
	}
	debs, _ := filepath.Glob(filepath.Join(dl, pkg+"_*.deb"))
	if len(debs) == 0 {
		return nil, fmt.Errorf("apt-get download %s left no .deb in %s", pkg, dl)
	}
	tmp := tree + ".tmp"
	os.RemoveAll(tmp)
	if _, err := run(ctx, "", "dpkg-deb", "-x", debs[len(debs)-1], tmp); err != nil {
		return nil, err
	}
	// An unpacked .deb has no modules.dep; modprobe -d needs one.
	if _, err := run(ctx, "", "depmod", "-b", tmp, rel); err != nil {
		return nil, err
	}
	os.RemoveAll(tree)
	if err := os.Rename(tmp, tree); err != nil {
		return nil, err
	}
	for _, d := range debs {
		os.Remove(d)
	}
	cfg.logf("kernel %s (%s): downloaded and unpacked in %v", rel, ver, time.Since(start).Round(time.Millisecond))
	return k, nil
}

// ModuleClosure returns the .ko paths to insmod, in load order, for the
// named modules (dependencies first, each once), using modprobe
// --show-depends against the unpacked tree. modprobe takes one module per
// call: further names would be read as module parameters.
func ModuleClosure(ctx context.Context, k *Kernel, names ...string) ([]string, error) {
	base := strings.TrimSuffix(k.Modules, filepath.Join("lib", "modules", k.Release))
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		s, err := run(ctx, "", "modprobe", "-d", base, "-S", k.Release, "--show-depends", n)
		if err != nil {
			return nil, err
		}
		for _, l := range strings.Split(s, "\n") {
			f := strings.Fields(l)
			if len(f) >= 2 && f[0] == "insmod" && !seen[f[1]] {
				seen[f[1]] = true
				out = append(out, f[1])
			}
		}
	}
	return out, nil
}

// ErrNoNetdevsimSource says the headers or source needed to build
// netdevsim are not installed.
var ErrNoNetdevsimSource = errors.New("netdevsim: linux-headers/linux-source not installed")

// BuildNetdevsim builds netdevsim.ko out of tree for k from Debian's
// linux-source-6.1 tarball against linux-headers-<release> (Debian's kernel
// has CONFIG_NETDEVSIM unset), strips its debug info and caches it. It
// returns ErrNoNetdevsimSource (wrapped, with the apt-get line that fixes
// it) when those packages are missing.
func BuildNetdevsim(ctx context.Context, cfg *Config, k *Kernel) (string, error) {
	out := filepath.Join(cfg.CacheDir, k.Release, "netdevsim.ko")
	if _, err := os.Stat(out); err == nil {
		cfg.logf("netdevsim.ko from cache %s", out)
		return out, nil
	}
	hdr := "/usr/src/linux-headers-" + k.Release
	srcs, _ := filepath.Glob("/usr/src/linux-source-*.tar.xz")
	if _, err := os.Stat(filepath.Join(hdr, "Makefile")); err != nil || len(srcs) == 0 {
		return "", fmt.Errorf("%w (need %s and /usr/src/linux-source-*.tar.xz: apt-get install --no-install-recommends linux-headers-%s linux-source-6.1)",
			ErrNoNetdevsimSource, hdr, k.Release)
	}
	src := srcs[len(srcs)-1]
	top := strings.TrimSuffix(filepath.Base(src), ".tar.xz")
	work, err := os.MkdirTemp(cfg.CacheDir, "netdevsim-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	t0 := time.Now()
	if _, err := run(ctx, work, "tar", "-xJf", src, "--strip-components=3", top+"/drivers/net/netdevsim"); err != nil {
		return "", err
	}
	t1 := time.Now()
	dir := filepath.Join(work, "netdevsim")
	if _, err := run(ctx, "", "make", "-C", hdr, "M="+dir, "CONFIG_NETDEVSIM=m", "modules", "-j2"); err != nil {
		return "", err
	}
	t2 := time.Now()
	if _, err := run(ctx, "", "strip", "--strip-debug", filepath.Join(dir, "netdevsim.ko")); err != nil {
		return "", err
	}
	if err := os.Rename(filepath.Join(dir, "netdevsim.ko"), out); err != nil {
		return "", err
	}
	cfg.logf("netdevsim.ko built: extract %v, make %v (source %s)", t1.Sub(t0).Round(time.Millisecond), t2.Sub(t1).Round(time.Millisecond), src)
	return out, nil
}
