package swengine

import (
	"context"
	"testing"
)

// The start-up calibration runs the real bench and returns a plausible
// figure: more than a handful of cycles (it parses, classifies and
// recycles a frame), far less than a millisecond's worth.
func TestCalibrate(t *testing.T) {
	c, err := Calibrate(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if c < 10 || c > 1e6 {
		t.Fatalf("calibrated %v cycles per packet", c)
	}
	t.Logf("calibrated %.0f cycles per packet", c)
	// At a given clock the figure is time per packet times that clock.
	if c1, err := Calibrate(context.Background(), 1); err != nil || !(c1 > 0) {
		t.Fatalf("at 1 GHz: %v %v", c1, err)
	}
}
