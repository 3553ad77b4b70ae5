package kernellab

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Verdict lines printed by the guest's /init.
const (
	PassLine = "KERNELLAB PASS"
	FailLine = "KERNELLAB FAIL"
)

// BootOptions configure one guest run.
type BootOptions struct {
	Vmlinuz, Initrd string
	MemoryMiB       int    // 1024 when 0
	CPUs            int    // 2 when 0
	Accel           string // "tcg" when empty
	Append          string // extra kernel command line
	// Serial, when set, receives the whole console output.
	Serial io.Writer
	// Line is called for each console line as it arrives (may be nil).
	Line func(string)
}

// Result is what a guest run produced.
type Result struct {
	Console string
	Pass    bool
	RC      int // guest test binary exit status, -1 when no verdict line came
	Wall    time.Duration
}

var failRE = regexp.MustCompile(`KERNELLAB FAIL rc=(\d+)`)

// Boot runs qemu-system-x86_64 with the kernel and initramfs until the
// guest powers off (or ctx ends) and parses the verdict. A kernel panic
// ends qemu through panic=-1 with -no-reboot.
func Boot(ctx context.Context, o BootOptions) (*Result, error) {
	if o.MemoryMiB == 0 {
		o.MemoryMiB = 1024
	}
	if o.CPUs == 0 {
		o.CPUs = 2
	}
	if o.Accel == "" {
		o.Accel = "tcg"
	}
	args := []string{
		"-accel", o.Accel, "-m", strconv.Itoa(o.MemoryMiB), "-smp", strconv.Itoa(o.CPUs),
		"-nographic", "-no-reboot", "-nodefaults", "-serial", "stdio",
		"-kernel", o.Vmlinuz, "-initrd", o.Initrd,
		// no_timer_check: under TCG on a loaded host the kernel's check of
		// the IO-APIC timer IRQ can time out and panic ("IO-APIC + timer
		// doesn't work"); the check is meaningless for qemu's emulated PIT.
		"-append", strings.TrimSpace("console=ttyS0 quiet panic=-1 no_timer_check " + o.Append),
	}
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	cmd.Stdin = nil
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		done <- err
	}()
	var all strings.Builder
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		l := strings.TrimRight(sc.Text(), "\r")
		all.WriteString(l)
		all.WriteByte('\n')
		if o.Serial != nil {
			fmt.Fprintln(o.Serial, l)
		}
		if o.Line != nil {
			o.Line(l)
		}
	}
	werr := <-done
	r := &Result{Console: all.String(), RC: -1, Wall: time.Since(start)}
	switch {
	case strings.Contains(r.Console, PassLine):
		r.Pass, r.RC = true, 0
	case failRE.MatchString(r.Console):
		r.RC, _ = strconv.Atoi(failRE.FindStringSubmatch(r.Console)[1])
	}
	if ctx.Err() != nil {
		return r, fmt.Errorf("qemu: %w after %v (no poweroff)", ctx.Err(), r.Wall.Round(time.Second))
	}
	if werr != nil && !r.Pass && r.RC < 0 {
		return r, fmt.Errorf("qemu: %w", werr)
	}
	return r, nil
}
