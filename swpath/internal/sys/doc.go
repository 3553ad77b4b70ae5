// Package sys is the syscall shim of the software path's memory layer:
// anonymous mmap (with or without 2 MiB huge pages), transparent huge
// page advice (the pools', and the classifier's big block arrays'), the
// kernel's pool of 2 MiB pages as /proc/meminfo counts it (and pages set
// aside in it through nr_hugepages), mbind and
// get_mempolicy (which golang.org/x/sys/unix does not wrap), and CPU
// affinity. It is the only place under swpath/pool and
// swpath/numa that touches golang.org/x/sys/unix or unsafe.
//
// Errors are *os.SyscallError values naming the call, so errors.Is works
// against the unix.Errno values. On non-Linux systems every call returns
// ErrNotSupported.
package sys
