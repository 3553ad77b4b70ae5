package config

import (
	"strings"
	"testing"
)

func TestRxRingAndDrain(t *testing.T) {
	c, err := Parse("x", []byte("software: {interfaces: [eth0], rx_ring_entries: 4096, queue_drain_mpps: 5.5}\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if c.Software.RxRingEntries != 4096 || c.Software.QueueDrainMpps != 5.5 {
		t.Fatalf("%+v", c.Software)
	}
	if c, err := Parse("x", []byte("software: {interfaces: [eth0]}\n"), false); err != nil || c.Software.RxRingEntries != 0 || c.Software.QueueDrainMpps != 0 {
		t.Fatalf("defaults: %+v %v", c.Software, err)
	}
	for _, bad := range []struct{ yaml, want string }{
		{"rx_ring_entries: 1000", `software.rx_ring_entries "1000": must be auto (0) or a power of 2 from 256 to 32768`},
		{"rx_ring_entries: 128", `software.rx_ring_entries "128"`},
		{"rx_ring_entries: 65536", `software.rx_ring_entries "65536"`},
		{"queue_drain_mpps: -1", `software.queue_drain_mpps "-1"`},
	} {
		_, err := Parse("x", []byte("software: {interfaces: [eth0], "+bad.yaml+"}\n"), false)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", bad.yaml, err, bad.want)
		}
	}
}
