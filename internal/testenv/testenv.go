// Package testenv decides what a test does when the machine lacks what it
// needs (a tool, a privilege, a kernel feature): on a developer's machine it
// skips with the reason; under CI=true, where tests/all.sh installs every
// tool and runs as root on a kernel with the features, it fails, so that a
// missing dependency can never turn a test into a silent pass.
package testenv

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
)

// CI reports whether the tests run under CI (the environment variable CI is
// "true").
func CI() bool { return os.Getenv("CI") == "true" }

// Missing skips t with the reason, or fails it under CI.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatalf("CI=true, but the environment lacks what this test needs: %s", msg)
		return
	}
	t.Skip(msg)
}

// MissingUnderEmulation is Missing, except on a GOARCH other than amd64:
// CI runs those tests under qemu-user (the arm64 pass), which does not
// emulate some system calls (bpf, mbind, SIOCETHTOOL, NETLINK_GENERIC);
// the amd64 pass runs the same tests on a real kernel, where CI fails them.
func MissingUnderEmulation(t testing.TB, format string, args ...any) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skipf("%s (GOARCH=%s: the emulated pass; the amd64 pass runs this)", fmt.Sprintf(format, args...), runtime.GOARCH)
		return
	}
	Missing(t, format, args...)
}

// KernelOption returns the value of a kernel configuration option (such as
// "CONFIG_NET_DEVLINK") from /proc/config.gz or /boot/config-RELEASE: "y",
// "m", a value, "n" when the configuration says it is not set or does not
// name it, or "" when no configuration can be read.
func KernelOption(name string) string {
	var sc *bufio.Scanner
	if f, err := os.Open("/proc/config.gz"); err == nil {
		defer f.Close()
		z, err := gzip.NewReader(f)
		if err != nil {
			return ""
		}
		sc = bufio.NewScanner(z)
	} else {
		rel, err := os.ReadFile("/proc/sys/kernel/osrelease")
		if err != nil {
			return ""
		}
		f, err := os.Open("/boot/config-" + strings.TrimSpace(string(rel)))
		if err != nil {
			return ""
		}
		defer f.Close()
		sc = bufio.NewScanner(f)
	}
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+"="); ok {
			return v
		}
	}
	if sc.Err() != nil {
		return ""
	}
	return "n"
}

// KernelLacks skips t where the running kernel was built without option
// (its configuration says so), and is Missing otherwise: a feature the
// kernel's configuration says it has, or a configuration that cannot be
// read, fails under CI. covered names where CI checks the feature instead
// (the kernel lab boots its own kernel), and is part of the skip message.
func KernelLacks(t testing.TB, option, covered, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if KernelOption(option) == "n" {
		t.Skipf("%s: the running kernel is built without %s (its configuration says so); %s", msg, option, covered)
		return
	}
	Missing(t, "%s (%s is %q in the kernel's configuration)", msg, option, KernelOption(option))
}
