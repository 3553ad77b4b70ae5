package dv

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
)

// Engine runs workers, each on its own goroutine locked to an OS thread
// pinned to its CPU. Whoever calls Start calls Stop (or cancels the
// context passed to Start and then calls Stop to wait).
type Engine struct {
	workers []*Worker
	stop    atomic.Bool
	wg      sync.WaitGroup
	mu      sync.Mutex
	errs    []error
	started bool
	stopped bool
	done    chan struct{}
}

// NewEngine returns an engine over workers; nothing runs until Start.
func NewEngine(workers ...*Worker) *Engine {
	return &Engine{workers: workers, done: make(chan struct{})}
}

// Workers returns the engine's workers, in the order given.
func (e *Engine) Workers() []*Worker { return e.workers }

// Start starts every worker. When ctx is done the workers stop at their
// next burst; Stop waits for them.
func (e *Engine) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return errors.New("dv: engine started twice")
	}
	e.started = true
	for _, w := range e.workers {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			if err := w.Run(&e.stop); err != nil {
				e.mu.Lock()
				e.errs = append(e.errs, err)
				e.mu.Unlock()
			}
		}()
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		select {
		case <-ctx.Done():
			e.stop.Store(true)
		case <-e.done:
		}
	}()
	return nil
}

// Stop sets the stop flag, waits for every worker, and returns their
// start-up errors (a CPU that could not be pinned). It is idempotent.
func (e *Engine) Stop() error {
	e.mu.Lock()
	if !e.stopped {
		e.stopped = true
		e.stop.Store(true)
		close(e.done)
	}
	e.mu.Unlock()
	e.wg.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	return errors.Join(e.errs...)
}

// Err returns the start-up errors of workers that have exited so far
// (a CPU that could not be pinned), without stopping the others.
func (e *Engine) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return errors.Join(e.errs...)
}

// Snapshot returns every worker's counters; safe while the engine runs.
func (e *Engine) Snapshot() []Counters {
	out := make([]Counters, len(e.workers))
	for i, w := range e.workers {
		out[i] = w.Snapshot()
	}
	return out
}

// Total sums counters.
func Total(cs []Counters) Counters {
	var t Counters
	t.Name = "total"
	for _, c := range cs {
		t.Rx += c.Rx
		t.RxBytes += c.RxBytes
		t.Dropped += c.Dropped
		t.Passed += c.Passed
		t.Tx += c.Tx
		t.TxFull += c.TxFull
		t.TxDone += c.TxDone
		t.RxErrors += c.RxErrors
		t.SeqErrors += c.SeqErrors
		t.Unposted += c.Unposted
		t.Sessions += c.Sessions
		t.NoBuf += c.NoBuf
		t.OutOfBuffer += c.OutOfBuffer
		t.CacheHits += c.CacheHits
		t.Bursts += c.Bursts
		t.Idle += c.Idle
		t.Cycles += c.Cycles
		t.CyclesRx += c.CyclesRx
		t.CyclesClassify += c.CyclesClassify
		t.CyclesOut += c.CyclesOut
	}
	return t
}
