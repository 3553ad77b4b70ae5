package cli

import (
	"log/slog"
	"os"
	rtdebug "runtime/debug"
	"strconv"

	"github.com/scrubd/scrubd/agent/config"
)

// gcPercent returns the collector target scrubd run sets and where it comes
// from: the config's gc_percent; without one, GOGC from the environment
// (gogc, as os.Getenv returns it) when it is set, which the runtime has
// applied already (set is false then); else config.DefaultGCPercent.
func gcPercent(cfg *config.Config, gogc string) (pct int, from string, set bool) {
	if cfg.GCPercent != 0 {
		return cfg.GCPercent, "gc_percent", true
	}
	if gogc != "" {
		if gogc == "off" {
			return -1, "GOGC", false
		}
		if n, err := strconv.Atoi(gogc); err == nil {
			return n, "GOGC", false
		}
		// The runtime ignores a GOGC it cannot read (it keeps 100); so
		// does scrubd: its own default applies.
	}
	return config.DefaultGCPercent, "default", true
}

// setMemoryPolicy applies the config's memory settings to the Go runtime
// (the collector target, gc_percent, and the soft memory limit,
// memory_limit_mb), logs them, and returns what puts the previous
// settings back.
func setMemoryPolicy(cfg *config.Config, log *slog.Logger) (restore func()) {
	var undo []func()
	pct, from, set := gcPercent(cfg, os.Getenv("GOGC"))
	if set {
		prev := rtdebug.SetGCPercent(pct)
		undo = append(undo, func() { rtdebug.SetGCPercent(prev) })
	}
	log.Info("Go collector target set", "gc_percent", pct, "from", from)
	if mb := cfg.MemoryLimitMB; mb > 0 {
		prev := rtdebug.SetMemoryLimit(int64(mb) << 20)
		undo = append(undo, func() { rtdebug.SetMemoryLimit(prev) })
		log.Info("Go runtime soft memory limit set", "memory_limit_mb", mb)
	}
	return func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
}
