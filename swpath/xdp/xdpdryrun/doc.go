// Package xdpdryrun puts the XDP engine behind swpath/dryrun's Engine
// interface as the engine "xdp": every frame of a capture goes through the
// loaded XDP program with BPF_PROG_TEST_RUN (no interface involved), and the
// rule that decided it comes back from the program itself. Importing the
// package registers the engine (Linux only; it needs CAP_BPF, CAP_NET_ADMIN
// and CAP_PERFMON, or root).
package xdpdryrun
