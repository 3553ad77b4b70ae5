//go:build mlx5 && cgo

package verbs

import (
	"errors"
	"fmt"
	"net"

	"github.com/scrubd/scrubd/swpath/classifier"
	"github.com/scrubd/scrubd/swpath/dv"
	"github.com/scrubd/scrubd/swpath/numa"
	"github.com/scrubd/scrubd/swpath/pool"
)

// PortConfig describes one scrubbing direction on real hardware: frames
// received on RxNetdev are classified and, unless Host is set, the passed
// ones are sent out of TxNetdev (the peer port: p0 -> p1, or uplink ->
// host representor).
type PortConfig struct {
	RxNetdev, TxNetdev string
	// CPUs are the workers' CPUs, one receive queue each; their count must
	// be a power of 2.
	CPUs []int
	// Log2 sizes every receive and send queue (default 10).
	Log2     uint
	Compress bool
	// MAC steers only frames to this address; nil is promiscuous.
	MAC        net.HardwareAddr
	FlowTag    uint32
	Host       bool
	Pool       *pool.Pool
	Topology   *numa.Topology // for the netdev's node; nil: numa.ReadLive()
	Classifier *classifier.Classifier
}

// Port is a configured direction; Engine runs its workers.
type Port struct {
	Engine  *dv.Engine
	Workers []*dv.Worker
	rxDev   *Device
	txDev   *Device
	rx      *Rx
	tx      []*Tx
	caches  []*pool.Cache
	clsW    []*classifier.Worker
}

// SetupPort opens the devices behind the netdevs, registers every pool
// arena on them, creates one send queue per worker on the peer (first, as
// VPP does) and the receive side, and builds the workers. Start the
// engine with p.Engine.Start(ctx); Close after stopping it.
func SetupPort(cfg PortConfig) (p *Port, err error) {
	if len(cfg.CPUs) == 0 || len(cfg.CPUs)&(len(cfg.CPUs)-1) != 0 {
		return nil, fmt.Errorf("verbs: PortConfig.CPUs = %v: want a power of 2 of them", cfg.CPUs)
	}
	if cfg.Pool == nil || cfg.Classifier == nil {
		return nil, errors.New("verbs: PortConfig needs Pool and Classifier")
	}
	if cfg.Log2 == 0 {
		cfg.Log2 = 10
	}
	topo := cfg.Topology
	if topo == nil {
		if topo, err = numa.ReadLive(); err != nil {
			return nil, err
		}
	}
	devNode, _ := topo.NetdevNode(cfg.RxNetdev)
	p = &Port{}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	open := func(netdev string) (*Device, map[int]uint32, error) {
		name, err := DeviceForNetdev(netdev)
		if err != nil {
			return nil, nil, err
		}
		d, err := Open(name)
		if err != nil {
			return nil, nil, err
		}
		lkeys := map[int]uint32{}
		for _, n := range cfg.Pool.Nodes() {
			k, err := d.RegisterArena(cfg.Pool.Region(n))
			if err != nil {
				d.Close()
				return nil, nil, err
			}
			lkeys[n] = k
		}
		return d, lkeys, nil
	}
	rxDev, rxKeys, err := open(cfg.RxNetdev)
	if err != nil {
		return nil, err
	}
	p.rxDev = rxDev
	var txKeys map[int]uint32
	if !cfg.Host {
		if p.txDev, txKeys, err = open(cfg.TxNetdev); err != nil {
			return nil, err
		}
		for range cfg.CPUs {
			tx, err := p.txDev.CreateTx(cfg.Log2)
			if err != nil {
				return nil, err
			}
			p.tx = append(p.tx, tx)
		}
	}
	if p.rx, err = rxDev.CreateRx(RxConfig{Queues: len(cfg.CPUs), Log2: cfg.Log2, Compress: cfg.Compress, MAC: cfg.MAC, FlowTag: cfg.FlowTag}); err != nil {
		return nil, err
	}
	for i, cpu := range cfg.CPUs {
		name := fmt.Sprintf("%s/rx%d", cfg.RxNetdev, i)
		node := cfg.Pool.NodeFor(pool.Queue{Name: name, CPU: cpu, DeviceNode: devNode})
		arena, err := dv.ArenaOf(cfg.Pool, node)
		if err != nil {
			return nil, err
		}
		cache, err := cfg.Pool.NewCacheOnNode(name, node)
		if err != nil {
			return nil, err
		}
		p.caches = append(p.caches, cache)
		rxq, err := dv.NewRxQueue(p.rx.Rings[i], arena, rxKeys[node], 0)
		if err != nil {
			return nil, err
		}
		var txq *dv.TxQueue
		if !cfg.Host {
			if txq, err = dv.NewTxQueue(p.tx[i].Rings, arena, txKeys[node], 0); err != nil {
				return nil, err
			}
		}
		cw := cfg.Classifier.NewWorker()
		p.clsW = append(p.clsW, cw)
		devName := rxDev.Name
		w, err := dv.NewWorker(dv.WorkerConfig{
			Name: name, CPU: cpu, RX: rxq, TX: txq, Arena: arena, Cache: cache, Classifier: cw, Spin: true,
			// The NIC counts out-of-buffer drops per port, not per queue.
			OutOfBuffer: func() uint64 { v, _ := OutOfBuffer(devName, 1); return v },
		})
		if err != nil {
			return nil, err
		}
		p.Workers = append(p.Workers, w)
	}
	p.Engine = dv.NewEngine(p.Workers...)
	return p, nil
}

// Close stops the engine if it runs, destroys the receive side first (so
// the NIC stops writing), returns every ring buffer to its cache, then
// destroys the send queues, closes the caches and the devices.
func (p *Port) Close() error {
	var errs []error
	if p.Engine != nil {
		errs = append(errs, p.Engine.Stop())
	}
	if p.rx != nil {
		errs = append(errs, p.rx.Close())
	}
	for _, w := range p.Workers {
		w.Release()
	}
	for _, tx := range p.tx {
		errs = append(errs, tx.Close())
	}
	for _, c := range p.caches {
		errs = append(errs, c.Close())
	}
	for _, w := range p.clsW {
		w.Close()
	}
	if p.rxDev != nil {
		errs = append(errs, p.rxDev.Close())
	}
	if p.txDev != nil {
		errs = append(errs, p.txDev.Close())
	}
	*p = Port{}
	return errors.Join(errs...)
}
