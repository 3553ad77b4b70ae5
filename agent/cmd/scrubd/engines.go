package main

// Dry-run engines beyond the Go classifier register themselves with
// swpath/dryrun when imported.
import (
	_ "github.com/scrubd/scrubd/swpath/dv/dvdryrun"   // --engine dv: the Direct Verbs engine over the NIC emulator
	_ "github.com/scrubd/scrubd/swpath/xdp/xdpdryrun" // --engine xdp: the XDP program through BPF_PROG_TEST_RUN
)
