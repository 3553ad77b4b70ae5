package testenv

import (
	"os"
	"testing"
)

// fakeTB records what a helper did instead of ending the test.
type fakeTB struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skip(args ...any) {
	f.skipped = true
	f.msg = args[0].(string)
}
func (f *fakeTB) Skipf(format string, args ...any)  { f.skipped = true; f.msg = format }
func (f *fakeTB) Fatalf(format string, args ...any) { f.failed = true; f.msg = format }

func TestMissing(t *testing.T) {
	old, had := os.LookupEnv("CI")
	defer func() {
		if had {
			os.Setenv("CI", old)
		} else {
			os.Unsetenv("CI")
		}
	}()
	os.Setenv("CI", "true")
	f := &fakeTB{TB: t}
	Missing(f, "no %s", "tool")
	if !f.failed || f.skipped {
		t.Fatalf("CI=true: failed %v skipped %v", f.failed, f.skipped)
	}
	os.Setenv("CI", "")
	f = &fakeTB{TB: t}
	Missing(f, "no %s", "tool")
	if f.failed || !f.skipped || f.msg != "no tool" {
		t.Fatalf("no CI: failed %v skipped %v %q", f.failed, f.skipped, f.msg)
	}
}

func TestKernelOption(t *testing.T) {
	// Every Linux kernel this project runs on has these set (or the
	// configuration cannot be read at all, "" ).
	for _, o := range []string{"CONFIG_NET", "CONFIG_INET"} {
		if v := KernelOption(o); v != "y" && v != "" {
			t.Errorf("%s = %q", o, v)
		}
	}
	if v := KernelOption("CONFIG_SCRUBD_NO_SUCH_OPTION"); v != "n" && v != "" {
		t.Errorf("an option no kernel has: %q", v)
	}
}
