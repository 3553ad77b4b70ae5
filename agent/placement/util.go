package placement

import (
	"errors"

	"github.com/scrubd/scrubd/agent/dataplane"
)

func asHW(err error, he **dataplane.HWError) bool { return errors.As(err, he) }
