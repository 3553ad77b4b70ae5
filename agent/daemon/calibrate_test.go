package daemon

import (
	"context"
	"testing"
)

// The start-up calibration runs the real bench and returns a plausible
// figure: more than a handful of cycles (it parses, classifies and
// recycles a frame), far less than a millisecond's worth.
func TestCalibrate(t *testing.T) {
	c, err := Calibrate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c < 10 || c > 1e6 {
		t.Fatalf("calibrated %v cycles per packet", c)
	}
	t.Logf("calibrated %.0f cycles per packet", c)
}
