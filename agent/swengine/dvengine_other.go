//go:build !(mlx5 && cgo)

package swengine

import (
	"context"
	"errors"

	"github.com/scrubd/scrubd/agent/config"
	"github.com/scrubd/scrubd/agent/dataplane"
)

func dvEngine(context.Context, *config.Config) (dataplane.SW, func() error, error) {
	return nil, nil, errors.New("software.engine dv on a device needs the mlx5 build of scrubd (go build -tags mlx5 with cgo and rdma-core's libibverbs-dev; deploy/build.sh makes it); this binary runs dv only over the NIC emulator (offload.backend: sim)")
}
