// Package config is scrubd's configuration schema: the YAML file an operator
// writes, its defaults, and its validation. Unknown keys are errors; every
// error names the field and the value. Loading touches nothing but the files
// it reads (the config and the rule files it names), so `scrubd config check`
// is safe on a running system.
package config

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/scrubd/scrubd/swpath/rule"
)

// Config is the whole agent configuration.
type Config struct {
	// Node names this agent in logs and metrics (default: the host name).
	Node string `yaml:"node"`
	// LinkGbps is the speed of the scrubbed link, for the regime model.
	LinkGbps float64 `yaml:"link_gbps"`
	// StateDir holds the agent's state file (API-added rules, placements).
	StateDir string      `yaml:"state_dir"`
	Rules    RuleFiles   `yaml:"rules"`
	API      API         `yaml:"api"`
	Metrics  Metrics     `yaml:"metrics"`
	Protect  []Protect   `yaml:"protect"`
	FlowSpec FlowSpec    `yaml:"flowspec"`
	Offload  Offload     `yaml:"offload"`
	Software Software    `yaml:"software"`
	Place    Placement   `yaml:"placement"`
	Shutdown ShutdownCfg `yaml:"shutdown"`
	// MemoryLimitMB is the Go runtime's soft memory limit in MiB
	// (runtime/debug.SetMemoryLimit), set by scrubd run; 0 sets none (the
	// heap grows by GCPercent over the live heap, up to GOMEMLIMIT's limit
	// if the environment sets one).
	MemoryLimitMB int `yaml:"memory_limit_mb"`
	// GCPercent is the Go collector's target (runtime/debug.SetGCPercent),
	// set by scrubd run: the heap grows to the live heap times 1 +
	// GCPercent/100 before it is collected. 0 (the default): GOGC from the
	// environment if it is set, else DefaultGCPercent.
	GCPercent int `yaml:"gc_percent"`
}

// RuleFiles are the YAML rule files (swpath/rule format).
type RuleFiles struct {
	Files []string `yaml:"files"`
	// Poll is how often files are checked for changes (SIGHUP reloads at once).
	Poll time.Duration `yaml:"poll"`
	// Guard limits how much a rule may cover, for every source of rules
	// (rule files, the API, FlowSpec).
	Guard Guard `yaml:"guard"`
	// MaxRulesPerSource bounds the rules one source (a rule file, the
	// API, a FlowSpec session) holds; a change past it is refused whole.
	MaxRulesPerSource int `yaml:"max_rules_per_source"`
}

// Guard is rules.guard: a drop rule needs a source or destination prefix at
// least MinPrefixV4 (IPv4) or MinPrefixV6 (IPv6) bits long; "match: all"
// needs AllowMatchAll.
type Guard struct {
	MinPrefixV4   int  `yaml:"min_prefix_v4"`
	MinPrefixV6   int  `yaml:"min_prefix_v6"`
	AllowMatchAll bool `yaml:"allow_match_all"`
	// MaxListEntries bounds each list condition of a rule (ports, DSCP...).
	MaxListEntries int `yaml:"max_list_entries"`
}

// Defaults of the intake limits: rules.guard.max_list_entries (entries of
// one list condition of a rule) and rules.max_rules_per_source.
const (
	DefaultMaxListEntries    = 256
	DefaultMaxRulesPerSource = 200000
	// DefaultMaxEntriesPerRule is offload.max_entries_per_rule.
	DefaultMaxEntriesPerRule = 256
)

// Rule returns the guard in the rule package's terms.
func (g Guard) Rule() rule.Guard {
	return rule.Guard{MinPrefixV4: g.MinPrefixV4, MinPrefixV6: g.MinPrefixV6, AllowMatchAll: g.AllowMatchAll, MaxListEntries: g.MaxListEntries}
}

// API is the HTTP/JSON rule API.
type API struct {
	// Socket is the unix socket path ("" disables the socket).
	Socket string `yaml:"socket"`
	// TCP is an optional host:port; it requires TokenFile.
	TCP string `yaml:"tcp"`
	// TokenFile holds the bearer token TCP clients must send. Group and
	// others must have no access to it (mode 0600 or 0400).
	TokenFile string `yaml:"token_file"`
	// TLSCertFile and TLSKeyFile (PEM) make the TCP listener speak TLS;
	// a TCP listener on an address other than loopback requires them.
	TLSCertFile string `yaml:"tls_cert_file"`
	TLSKeyFile  string `yaml:"tls_key_file"`
	// TLSClientCAFile, if set, makes the TCP listener require a client
	// certificate signed by one of its CAs (mutual TLS).
	TLSClientCAFile string `yaml:"tls_client_ca_file"`
	// Limits applied to every listener (the socket, the TCP listener and
	// metrics.listen), each listener with its own connection limit.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout"`
	ReadTimeout       time.Duration `yaml:"read_timeout"`
	WriteTimeout      time.Duration `yaml:"write_timeout"`
	IdleTimeout       time.Duration `yaml:"idle_timeout"`
	MaxConnections    int           `yaml:"max_connections"`
	MaxHeaderBytes    int           `yaml:"max_header_bytes"`
	MaxBodyBytes      int64         `yaml:"max_body_bytes"`
}

// TLS reports whether the TCP listener is configured for TLS.
func (a *API) TLS() bool { return a.TLSCertFile != "" || a.TLSKeyFile != "" }

// Token reads the bearer token from TokenFile: the file must exist, give
// group and others no access, and hold a token (surrounding white space is
// trimmed). The daemon and Validate both use it, so `config check` refuses
// what `run` would.
func (a *API) Token() (string, error) {
	fi, err := os.Stat(a.TokenFile)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("not a regular file")
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("mode %04o: group or others can read or change the token; chmod 600 %s", perm, a.TokenFile)
	}
	data, err := os.ReadFile(a.TokenFile)
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("empty: it must hold the bearer token")
	}
	return tok, nil
}

// TLSConfig builds the TCP listener's TLS configuration from the
// certificate, key and client CA files (nil when TLS is not configured):
// TLS 1.2 or later, HTTP/1.1 only, and with a client CA a client
// certificate it signed is required. The error names the key at fault.
func (a *API) TLSConfig() (*tls.Config, error) {
	if !a.TLS() {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(a.TLSCertFile, a.TLSKeyFile)
	if err != nil {
		return nil, &Error{Field: "api.tls_cert_file", Value: a.TLSCertFile, Msg: fmt.Sprintf("with api.tls_key_file %q: %v", a.TLSKeyFile, err)}
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	if a.TLSClientCAFile != "" {
		pem, err := os.ReadFile(a.TLSClientCAFile)
		if err != nil {
			return nil, &Error{Field: "api.tls_client_ca_file", Value: a.TLSClientCAFile, Msg: err.Error()}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &Error{Field: "api.tls_client_ca_file", Value: a.TLSClientCAFile, Msg: "no PEM certificate in it"}
		}
		tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return tc, nil
}

// Metrics is the Prometheus endpoint.
type Metrics struct {
	// Listen is host:port for /metrics ("" disables it).
	Listen string `yaml:"listen"`
	// MaxRuleSeries bounds per-rule series; the rest are summed into
	// rule="_other".
	MaxRuleSeries int `yaml:"max_rule_series"`
}

// Protect is a prefix (and optionally a protocol and ports) that no rule may
// drop. Direction says which address the prefix is checked against: "dst"
// (traffic to it, the default: a management address), "src" (traffic from
// it) or "both".
type Protect struct {
	Prefix    string   `yaml:"prefix"`
	Direction string   `yaml:"direction"`
	Proto     string   `yaml:"proto"`
	Ports     []string `yaml:"ports"`
	Note      string   `yaml:"note"`
}

// DefaultMaxRoutes is flowspec.max_routes when none is set: as many as
// rules.max_rules_per_source's default, about 380 MiB of the speaker's
// memory per neighbour and family when full.
const DefaultMaxRoutes = DefaultMaxRulesPerSource

// FlowSpec is the in-process BGP speaker.
type FlowSpec struct {
	Enabled bool   `yaml:"enabled"`
	ASN     uint32 `yaml:"asn"`
	// RouterID is an IPv4 address, or "auto": the local address the
	// routing table picks toward the first IPv4 neighbor (one config for a
	// fleet, a distinct ID per node).
	RouterID string `yaml:"router_id"`
	// ListenPort: 179 by default; -1 makes every session active-only.
	ListenPort    int32      `yaml:"listen_port"`
	ListenAddress string     `yaml:"listen_address"`
	Neighbors     []Neighbor `yaml:"neighbors"`
	// OnSessionDown: "hold" (keep learned rules for HoldTime, then remove;
	// the default), "remove" (at once) or "keep" (until the peer withdraws).
	OnSessionDown string        `yaml:"on_session_down"`
	HoldTime      time.Duration `yaml:"hold_time"`
	// Priority given to learned rules (default 500).
	Priority uint32 `yaml:"priority"`
	// AllowedDestinations (required when enabled): a route whose
	// destination prefix is not inside one of these is refused (RFC 8955
	// section 6-style trust).
	AllowedDestinations []string `yaml:"allowed_destinations"`
	// ConnectRetry is how long an active session waits before dialing a
	// neighbour again (GoBGP waits between this and twice this).
	ConnectRetry time.Duration `yaml:"connect_retry"`
	// MaxRoutes bounds the routes one neighbour's session may hold in one
	// address family (FlowSpec IPv4, FlowSpec IPv6), refused ones
	// included: the BGP speaker keeps every route a session announces
	// (about 1.9 KB each), so a neighbour that announces millions would
	// take the agent's memory. The UPDATE that would pass it resets the
	// session (Cease, Maximum Number of Prefixes Reached: RFC 4486) and
	// holds the neighbour down for a while. Default DefaultMaxRoutes.
	MaxRoutes int `yaml:"max_routes"`
	// GracefulRestart: RFC 4724 (and RFC 9494) as the receiving speaker.
	GracefulRestart GracefulRestart `yaml:"graceful_restart"`
}

// GracefulRestart is flowspec.graceful_restart.
type GracefulRestart struct {
	// Enabled advertises the capability (default true): a route reflector
	// that restarts keeps the agent's rules in force, stale, for its
	// restart time, and its End-of-RIB sweeps what it did not send again.
	Enabled *bool `yaml:"enabled"`
	// RestartTime is the restart time scrubd advertises (1s-4095s).
	RestartTime time.Duration `yaml:"restart_time"`
	// LongLivedStaleTime, if positive, advertises long-lived graceful
	// restart (RFC 9494); a restarting peer that advertised it too keeps
	// its rules for its restart time plus the lesser of the two stale
	// times.
	LongLivedStaleTime time.Duration `yaml:"long_lived_stale_time"`
}

// GR reports whether graceful restart is on (the default).
func (g GracefulRestart) GR() bool { return g.Enabled == nil || *g.Enabled }

// Neighbor is one configured BGP peer.
type Neighbor struct {
	Address string `yaml:"address"`
	ASN     uint32 `yaml:"asn"`
	Port    uint32 `yaml:"port"`
	// Passive waits for the peer to connect.
	Passive     bool   `yaml:"passive"`
	Description string `yaml:"description"`
	// LocalAddress is the session's source address (optional): several
	// agents on one host each dial from their own address, so the route
	// reflector tells them apart.
	LocalAddress string `yaml:"local_address"`
}

// Offload selects and sizes the hardware backend.
type Offload struct {
	// Backend: "tcflower", "sim" or "none".
	Backend string   `yaml:"backend"`
	Devices []string `yaml:"devices"`
	// KeepOnShutdown leaves hardware rules installed when the agent stops
	// (default true), so enforcement never has a gap; the next start
	// reconciles.
	KeepOnShutdown *bool `yaml:"keep_on_shutdown"`
	// MaxEntries and MaxMasks bound what placement puts in hardware (0: what
	// the backend reports).
	MaxEntries int `yaml:"max_entries"`
	MaxMasks   int `yaml:"max_masks"`
	// MaxEntriesPerRule bounds the hardware entries one rule may compile
	// to; a rule over it is enforced in software with the reason.
	MaxEntriesPerRule int `yaml:"max_entries_per_rule"`
}

// Software selects and sizes the software path.
type Software struct {
	// Engine: "xdp" (the default: it runs on any interface with the
	// static build), "dv" or "none".
	Engine     string   `yaml:"engine"`
	Interfaces []string `yaml:"interfaces"`
	Workers    int      `yaml:"workers"`
	GHz        float64  `yaml:"ghz"`
	// CyclesPerPacket is "auto" (the default; 0 means the same): a short
	// calibration of the software path at start, then the engine's live
	// counters; or a fixed figure the capacity model keeps.
	CyclesPerPacket Cycles `yaml:"cycles_per_packet"`
	// ForwardTo is the interface the Direct Verbs or XDP engine forwards
	// passed frames to (inline scrubbing: the uplink's peer, e.g. pf0hpf on a
	// BlueField); empty is host mode: passed frames are counted and not
	// forwarded.
	ForwardTo string `yaml:"forward_to"`
	// BufferNode chooses the NUMA node each receive queue's buffers come
	// from (dv engine): "worker" (the default; the node of the CPU that
	// polls the queue) or "device" (the NIC's node, as VPP does; kept for
	// comparison). The netdev thread "NUMA and multiQ interation" (Tom
	// Herbert) measured 2.5x in favour of the worker's node.
	BufferNode string `yaml:"buffer_node"`
	// XDPPinPath is the bpffs directory where the xdp engine pins its maps
	// and links, so that a restarted agent takes them over without a gap
	// in filtering.
	XDPPinPath string `yaml:"xdp_pin_path"`
	// RxRingEntries sizes every receive queue of the dv engine and the
	// NIC emulator (its CQ gets twice as many entries); 0 ("auto") sizes it
	// from the capacity model (agent/plan: the busiest queue's load for
	// 500 us, within the last-level cache share of a worker's core).
	RxRingEntries int `yaml:"rx_ring_entries"`
	// QueueDrainMpps is how fast one receive queue's ring drains, in Mpps
	// (`scrubd bench`'s drain/q on the target); the placement model's ring
	// capacity is queues x this / the live imbalance. 0: unknown, and only
	// out-of-buffer counts speak for the ring.
	QueueDrainMpps float64 `yaml:"queue_drain_mpps"`
}

// Cycles is software.cycles_per_packet: a positive number of cycles, or 0
// for "auto".
type Cycles float64

// Auto reports whether the figure is to be calibrated and then measured.
func (c Cycles) Auto() bool { return c == 0 }

func (c Cycles) String() string {
	if c.Auto() {
		return "auto"
	}
	return strconv.FormatFloat(float64(c), 'g', -1, 64)
}

// UnmarshalYAML accepts "auto" or a number.
func (c *Cycles) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Value == "auto" {
		*c = 0
		return nil
	}
	var f float64
	if n.Kind != yaml.ScalarNode || n.Decode(&f) != nil {
		return &Error{Line: n.Line, Field: "software.cycles_per_packet", Value: n.Value, Msg: "must be auto or a number"}
	}
	*c = Cycles(f)
	return nil
}

// MarshalYAML writes "auto" or the number.
func (c Cycles) MarshalYAML() (any, error) {
	if c.Auto() {
		return "auto", nil
	}
	return float64(c), nil
}

// Placement tunes the regime-aware placement loop.
type Placement struct {
	Interval time.Duration `yaml:"interval"`
	// HighWater: software load (fraction of capacity) above which costly
	// rules move to hardware. LowWater: below which rules may move back.
	HighWater float64 `yaml:"high_water"`
	LowWater  float64 `yaml:"low_water"`
	// MinDwell is how long a rule stays on a path before it may move again.
	MinDwell time.Duration `yaml:"min_dwell"`
	// MaxMovesPerRound bounds how many rules move in one decision round.
	MaxMovesPerRound int `yaml:"max_moves_per_round"`
}

// ShutdownCfg tunes shutdown.
type ShutdownCfg struct {
	Timeout time.Duration `yaml:"timeout"`
}

// KeepHW reports whether hardware rules stay installed on shutdown.
func (c *Config) KeepHW() bool { return c.Offload.KeepOnShutdown == nil || *c.Offload.KeepOnShutdown }

// Defaults returns the configuration every file starts from.
func Defaults() Config {
	return Config{
		LinkGbps: 100,
		StateDir: "/var/lib/scrubd",
		Rules: RuleFiles{Poll: 2 * time.Second, Guard: Guard{MinPrefixV4: rule.DefaultGuard.MinPrefixV4,
			MinPrefixV6: rule.DefaultGuard.MinPrefixV6, MaxListEntries: DefaultMaxListEntries},
			MaxRulesPerSource: DefaultMaxRulesPerSource},
		API: API{Socket: "/run/scrubd/api.sock", ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
			WriteTimeout: 30 * time.Second, IdleTimeout: 30 * time.Second, MaxConnections: 64, MaxHeaderBytes: 16 << 10,
			MaxBodyBytes: 16 << 20},
		Metrics: Metrics{Listen: "127.0.0.1:9477", MaxRuleSeries: 500},
		FlowSpec: FlowSpec{ListenPort: 179, OnSessionDown: "hold", HoldTime: 5 * time.Minute, Priority: 500,
			ConnectRetry: 5 * time.Second, MaxRoutes: DefaultMaxRoutes, GracefulRestart: GracefulRestart{RestartTime: 120 * time.Second}},
		Offload:  Offload{Backend: "none", MaxEntriesPerRule: DefaultMaxEntriesPerRule},
		Software: Software{Engine: "xdp", Workers: 1, XDPPinPath: "/sys/fs/bpf/scrubd", BufferNode: "worker"},
		Place: Placement{Interval: time.Second, HighWater: 0.8, LowWater: 0.5,
			MinDwell: 30 * time.Second, MaxMovesPerRound: 8},
		Shutdown: ShutdownCfg{Timeout: 10 * time.Second},
	}
}

// Sim returns the configuration of `scrubd run --sim`: the simulated NIC
// table and the Direct Verbs engine over the NIC emulator, short dwell times
// so the demo moves rules within seconds, and files in a temporary state dir.
func Sim(stateDir string) Config {
	c := Defaults()
	c.Node = "sim"
	c.StateDir = stateDir
	c.API.Socket = stateDir + "/api.sock"
	c.Metrics.Listen = "127.0.0.1:9477"
	// A small table on purpose: it fills, and placement has to choose.
	c.Offload = Offload{Backend: "sim", MaxEntries: 10, MaxEntriesPerRule: DefaultMaxEntriesPerRule}
	c.Software = Software{Engine: "dv", Workers: 12, GHz: 2.13, CyclesPerPacket: 297, ForwardTo: "pf0hpf"}
	c.Place.Interval = time.Second
	c.Place.MinDwell = 3 * time.Second
	c.Protect = []Protect{{Prefix: "192.0.2.1/32", Note: "management address (sim)"}}
	return c
}

// Error is one refused configuration item.
type Error struct {
	File  string
	Line  int
	Field string
	Value string
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		if e.Value != "" {
			fmt.Fprintf(&b, " %q", e.Value)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Load reads and validates a config file. Relative paths in it (rule files,
// the API token file) are relative to the config file's directory, so the
// same file works whatever directory the agent starts in. Rule files it
// names are parsed too (refused rule files make the config invalid).
func Load(path string) (*Config, error) { return load(path, true) }

// LoadForRun reads and checks the config file at path as Load does, except
// for what the checks read from other files (rule files, the API token,
// TLS files): `scrubd run` leaves those to ValidateRun, which the daemon
// calls before it touches anything and whose parsed rule files it loads.
// Load and ValidateRun one after the other parsed every rule file twice
// (at 100k rules, 1.5-2 s and 430 MB allocated each).
func LoadForRun(path string) (*Config, error) { return load(path, false) }

// load reads the config file at path and parses it with paths relative to
// its directory; checkFiles is parse's checkRuleFiles.
func load(path string, checkFiles bool) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, &Error{File: path, Msg: err.Error()}
	}
	return parse(path, data, checkFiles, filepath.Dir(abs))
}

// Parse decodes and validates config text. checkRuleFiles parses the rule
// files it names and reads the API's token and TLS files. Relative paths stay relative to the working directory
// (Load resolves them against the file's directory).
func Parse(name string, data []byte, checkRuleFiles bool) (*Config, error) {
	return parse(name, data, checkRuleFiles, "")
}

func parse(name string, data []byte, checkRuleFiles bool, dir string) (*Config, error) {
	c := Defaults()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlError(name, data, err)
	}
	if dir != "" {
		c.resolve(dir)
	}
	if c.Node == "" {
		// The documented default: without it every agent of a fleet
		// reported scrubd_info{node=""}.
		c.Node, _ = os.Hostname()
	}
	if err := c.Validate(name, checkRuleFiles); err != nil {
		return nil, err
	}
	return &c, nil
}

// resolve makes the file paths in c absolute against dir.
func (c *Config) resolve(dir string) {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	for i, f := range c.Rules.Files {
		c.Rules.Files[i] = abs(f)
	}
	c.API.TokenFile = abs(c.API.TokenFile)
	c.API.TLSCertFile = abs(c.API.TLSCertFile)
	c.API.TLSKeyFile = abs(c.API.TLSKeyFile)
	c.API.TLSClientCAFile = abs(c.API.TLSClientCAFile)
}

// Validate checks every field and returns all problems found. With
// checkRuleFiles it also reads the files the config names (rule files, the
// API token, TLS certificates and keys) as `scrubd run` will. It is what
// `scrubd config check` runs and what `scrubd run` runs before it touches
// anything.
func (c *Config) Validate(file string, checkRuleFiles bool) error {
	return c.validate(context.Background(), file, checkRuleFiles, nil)
}

// LoadedRules is what ValidateRun read and parsed of the rule files, by
// path: the agent loads them from here rather than read and parse them a
// second time.
type LoadedRules struct {
	Data map[string][]byte
	Sets map[string]*rule.Set
}

// ValidateRun is Validate(file, true) for `scrubd run`: it also returns
// every rule file it read and parsed without a problem. Once ctx is done
// it stops parsing rule files and returns ctx's error.
func (c *Config) ValidateRun(ctx context.Context, file string) (LoadedRules, error) {
	keep := LoadedRules{Data: map[string][]byte{}, Sets: map[string]*rule.Set{}}
	err := c.validate(ctx, file, true, &keep)
	if ctx.Err() != nil {
		return LoadedRules{}, ctx.Err()
	}
	return keep, err
}

// validate runs the checks in the order of the config reference, each a
// step over one part of the config, and returns every problem found.
func (c *Config) validate(ctx context.Context, file string, readFiles bool, keep *LoadedRules) error {
	p := &problems{file: file}
	c.checkBasics(p)
	c.checkRules(ctx, p, readFiles, keep)
	c.checkAPI(p, readFiles)
	c.checkMetrics(p)
	c.checkProtect(p)
	c.checkFlowSpec(p)
	c.checkOffload(p)
	c.checkSoftware(p)
	c.checkPlacement(p)
	c.checkShutdown(p)
	return errors.Join(p.errs...)
}

// problems collects the refused items of one config file.
type problems struct {
	file string
	errs []error
}

// bad records that field (with value) is refused, and why.
func (p *problems) bad(field, value, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Field: field, Value: value, Msg: fmt.Sprintf(format, args...)})
}

// checkBasics checks the top-level keys (link_gbps, state_dir).
func (c *Config) checkBasics(p *problems) {
	if !(c.LinkGbps > 0) {
		p.bad("link_gbps", fmt.Sprint(c.LinkGbps), "must be a positive number")
	}
	if c.StateDir == "" {
		p.bad("state_dir", "", "required")
	}
	if n := c.MemoryLimitMB; n != 0 && n < MinMemoryLimitMB {
		p.bad("memory_limit_mb", strconv.Itoa(n), "must be 0 (no limit) or at least %d", MinMemoryLimitMB)
	}
	if n := c.GCPercent; n != 0 && (n < MinGCPercent || n > MaxGCPercent) {
		p.bad("gc_percent", strconv.Itoa(n), "must be 0 (the default) or %d-%d", MinGCPercent, MaxGCPercent)
	}
}

// The range of gc_percent, and the collector target scrubd run sets when
// neither gc_percent nor GOGC gives one. Below 10 the collector would run
// almost back to back; above 1000 the heap may grow to eleven times what
// is live.
const (
	MinGCPercent     = 10
	MaxGCPercent     = 1000
	DefaultGCPercent = 25
)

// MinMemoryLimitMB is the smallest memory_limit_mb: the agent with a few
// rules on the simulated NIC holds about 45 MB.
const MinMemoryLimitMB = 64

// checkRules checks rules.* and, with readFiles, reads and parses every
// rule file as the agent will (keeping what it read in keep, when set).
func (c *Config) checkRules(ctx context.Context, p *problems, readFiles bool, keep *LoadedRules) {
	if c.Rules.Poll <= 0 {
		p.bad("rules.poll", c.Rules.Poll.String(), "must be positive")
	}
	if g := c.Rules.Guard; g.MinPrefixV4 < 0 || g.MinPrefixV4 > 32 {
		p.bad("rules.guard.min_prefix_v4", strconv.Itoa(g.MinPrefixV4), "must be 0-32")
	}
	if g := c.Rules.Guard; g.MinPrefixV6 < 0 || g.MinPrefixV6 > 128 {
		p.bad("rules.guard.min_prefix_v6", strconv.Itoa(g.MinPrefixV6), "must be 0-128")
	}
	if n := c.Rules.Guard.MaxListEntries; n < 1 {
		p.bad("rules.guard.max_list_entries", strconv.Itoa(n), "must be at least 1")
	}
	if n := c.Rules.MaxRulesPerSource; n < 1 {
		p.bad("rules.max_rules_per_source", strconv.Itoa(n), "must be at least 1")
	}
	for i, f := range c.Rules.Files {
		fld := fmt.Sprintf("rules.files[%d]", i)
		if f == "" {
			p.bad(fld, "", "empty path")
			continue
		}
		if readFiles {
			data, err := os.ReadFile(f)
			if err != nil {
				p.bad(fld, f, "%v", err)
				continue
			}
			if ctx.Err() != nil {
				return
			}
			set, err := rule.ParseContext(ctx, f, data, time.Now())
			if err == nil {
				err = c.Rules.Guard.Rule().CheckSet(f, set)
			}
			if err != nil {
				p.bad(fld, f, "rule file refused: %v", err)
			} else if keep != nil {
				keep.Data[f], keep.Sets[f] = data, set
			}
		}
	}
}

// checkAPI checks api.*; with readFiles it reads the token and loads the
// TLS files.
func (c *Config) checkAPI(p *problems, readFiles bool) {
	// What run does with these (read the token, load the certificates)
	// goes through the same functions, so check and run agree.
	ap := &c.API
	if ap.TCP != "" {
		if a, err := netip.ParseAddrPort(ap.TCP); err != nil || a.Port() == 0 {
			p.bad("api.tcp", ap.TCP, "must be ip:port (port 1-65535)")
		} else if !a.Addr().Unmap().IsLoopback() && !ap.TLS() {
			p.bad("api.tcp", ap.TCP, "not a loopback address, and the bearer token would cross the network in clear text: set api.tls_cert_file and api.tls_key_file, or listen on 127.0.0.1 or [::1]")
		}
		if ap.TokenFile == "" {
			p.bad("api.token_file", "", "required when api.tcp is set (TCP needs a token)")
		} else if readFiles {
			if _, err := ap.Token(); err != nil {
				p.bad("api.token_file", ap.TokenFile, "%v", err)
			}
		}
	}
	if ap.TLS() || ap.TLSClientCAFile != "" {
		switch {
		case ap.TCP == "":
			p.bad("api.tls_cert_file", ap.TLSCertFile, "TLS is for the TCP listener: set api.tcp")
		case ap.TLSCertFile == "":
			p.bad("api.tls_cert_file", "", "required with api.tls_key_file and api.tls_client_ca_file")
		case ap.TLSKeyFile == "":
			p.bad("api.tls_key_file", "", "required with api.tls_cert_file")
		case readFiles:
			if _, err := ap.TLSConfig(); err != nil {
				var ce *Error
				if errors.As(err, &ce) {
					p.bad(ce.Field, ce.Value, "%s", ce.Msg)
				} else {
					p.bad("api.tls_cert_file", ap.TLSCertFile, "%v", err)
				}
			}
		}
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"api.read_header_timeout", ap.ReadHeaderTimeout}, {"api.read_timeout", ap.ReadTimeout},
		{"api.write_timeout", ap.WriteTimeout}, {"api.idle_timeout", ap.IdleTimeout}} {
		if d.v <= 0 {
			p.bad(d.key, d.v.String(), "must be positive")
		}
	}
	if ap.MaxConnections < 1 {
		p.bad("api.max_connections", strconv.Itoa(ap.MaxConnections), "must be at least 1")
	}
	if ap.MaxHeaderBytes < 1024 {
		p.bad("api.max_header_bytes", strconv.Itoa(ap.MaxHeaderBytes), "must be at least 1024")
	}
	if ap.MaxBodyBytes < 1024 {
		p.bad("api.max_body_bytes", strconv.FormatInt(ap.MaxBodyBytes, 10), "must be at least 1024")
	}
}

// checkMetrics checks metrics.*.
func (c *Config) checkMetrics(p *problems) {
	if c.Metrics.Listen != "" {
		if _, port, err := net.SplitHostPort(c.Metrics.Listen); err != nil {
			p.bad("metrics.listen", c.Metrics.Listen, "must be host:port")
		} else if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			p.bad("metrics.listen", c.Metrics.Listen, "port %q: must be a number 0-65535", port)
		}
	}
	if c.Metrics.MaxRuleSeries < 1 {
		p.bad("metrics.max_rule_series", strconv.Itoa(c.Metrics.MaxRuleSeries), "must be at least 1")
	}
}

// checkProtect checks every protect entry.
func (c *Config) checkProtect(p *problems) {
	for i, pr := range c.Protect {
		if _, err := pr.Rules(fmt.Sprintf("protect-%d", i)); err != nil {
			p.bad(fmt.Sprintf("protect[%d]", i), pr.Prefix, "%v", err)
		}
	}
}

// checkFlowSpec checks flowspec.* when FlowSpec is enabled.
func (c *Config) checkFlowSpec(p *problems) {
	fs := &c.FlowSpec
	if fs.Enabled {
		if fs.ASN == 0 {
			p.bad("flowspec.asn", "0", "required")
		}
		if a, err := netip.ParseAddr(fs.RouterID); fs.RouterID != "auto" && (err != nil || !a.Is4()) {
			p.bad("flowspec.router_id", fs.RouterID, "must be an IPv4 address or auto")
		}
		if fs.RouterID == "auto" && !slices.ContainsFunc(fs.Neighbors, func(n Neighbor) bool {
			a, err := netip.ParseAddr(n.Address)
			return err == nil && a.Unmap().Is4()
		}) {
			p.bad("flowspec.router_id", fs.RouterID, "auto takes the local IPv4 address toward an IPv4 neighbor, and none is configured")
		}
		if fs.ListenPort != -1 && (fs.ListenPort < 1 || fs.ListenPort > 65535) {
			p.bad("flowspec.listen_port", strconv.Itoa(int(fs.ListenPort)), "must be 1-65535, or -1 for no listener")
		}
		if fs.ListenAddress != "" {
			if _, err := netip.ParseAddr(fs.ListenAddress); err != nil {
				p.bad("flowspec.listen_address", fs.ListenAddress, "not an IP address")
			}
		}
		if len(fs.Neighbors) == 0 {
			p.bad("flowspec.neighbors", "", "at least one neighbor is required when flowspec is enabled")
		}
		for i, n := range fs.Neighbors {
			fld := fmt.Sprintf("flowspec.neighbors[%d]", i)
			if _, err := netip.ParseAddr(n.Address); err != nil {
				p.bad(fld+".address", n.Address, "not an IP address")
			}
			if n.ASN == 0 {
				p.bad(fld+".asn", "0", "required")
			}
			if n.Port > 65535 {
				p.bad(fld+".port", strconv.Itoa(int(n.Port)), "must be 0-65535")
			}
			if n.LocalAddress != "" {
				if la, err := netip.ParseAddr(n.LocalAddress); err != nil {
					p.bad(fld+".local_address", n.LocalAddress, "not an IP address")
				} else if a, err := netip.ParseAddr(n.Address); err == nil && la.Unmap().Is4() != a.Unmap().Is4() {
					p.bad(fld+".local_address", n.LocalAddress, "not of the neighbor address's family (%s)", n.Address)
				}
			}
		}
		switch fs.OnSessionDown {
		case "hold", "remove", "keep":
		default:
			p.bad("flowspec.on_session_down", fs.OnSessionDown, "must be hold, remove or keep")
		}
		if fs.ConnectRetry < time.Second || fs.ConnectRetry > time.Hour {
			p.bad("flowspec.connect_retry", fs.ConnectRetry.String(), "must be 1s-1h")
		}
		if fs.MaxRoutes < 1 || fs.MaxRoutes > 10_000_000 {
			p.bad("flowspec.max_routes", strconv.Itoa(fs.MaxRoutes), "must be 1-10000000 (routes one neighbour may hold in one address family)")
		}
		if gr := fs.GracefulRestart; gr.GR() {
			if gr.RestartTime < time.Second || gr.RestartTime > 4095*time.Second {
				p.bad("flowspec.graceful_restart.restart_time", gr.RestartTime.String(), "must be 1s-4095s (a 12-bit field of seconds, RFC 4724)")
			}
			if gr.LongLivedStaleTime < 0 || gr.LongLivedStaleTime > (1<<24-1)*time.Second {
				p.bad("flowspec.graceful_restart.long_lived_stale_time", gr.LongLivedStaleTime.String(), "must be 0 (off) to 16777215s (a 24-bit field of seconds, RFC 9494)")
			}
		}
		if fs.OnSessionDown == "hold" && fs.HoldTime <= 0 {
			p.bad("flowspec.hold_time", fs.HoldTime.String(), "must be positive with on_session_down: hold")
		}
		if len(fs.AllowedDestinations) == 0 {
			p.bad("flowspec.allowed_destinations", "", "required when flowspec is enabled: the destination prefixes this network owns (RFC 8955 section 6); routes for other destinations are refused")
		}
		for i, d := range fs.AllowedDestinations {
			if _, err := netip.ParsePrefix(d); err != nil {
				p.bad(fmt.Sprintf("flowspec.allowed_destinations[%d]", i), d, "not a CIDR prefix")
			}
		}
	}
}

// checkOffload checks offload.*.
func (c *Config) checkOffload(p *problems) {
	switch c.Offload.Backend {
	case "tcflower":
		if len(c.Offload.Devices) == 0 {
			p.bad("offload.devices", "", "tcflower needs at least one device")
		}
	case "sim", "none":
	default:
		p.bad("offload.backend", c.Offload.Backend, "must be tcflower, sim or none")
	}
	if c.Offload.MaxEntriesPerRule < 1 {
		p.bad("offload.max_entries_per_rule", strconv.Itoa(c.Offload.MaxEntriesPerRule), "must be at least 1")
	}
	if c.Offload.MaxEntries < 0 {
		p.bad("offload.max_entries", strconv.Itoa(c.Offload.MaxEntries), "must not be negative")
	}
	if c.Offload.MaxMasks < 0 {
		p.bad("offload.max_masks", strconv.Itoa(c.Offload.MaxMasks), "must not be negative")
	}
}

// checkSoftware checks software.* and how it fits offload.backend.
func (c *Config) checkSoftware(p *problems) {
	sw := &c.Software
	switch sw.Engine {
	case "dv", "xdp":
		if len(sw.Interfaces) == 0 && c.Offload.Backend != "sim" {
			p.bad("software.interfaces", "", "engine %s needs at least one interface", sw.Engine)
		}
	case "none":
	case "go":
		p.bad("software.engine", sw.Engine, "the Go classifier has no packet input in scrubd run (scrubd dryrun uses it): use xdp, dv or none")
	default:
		p.bad("software.engine", sw.Engine, "must be xdp, dv or none")
	}
	if sw.Engine == "dv" && c.Offload.Backend != "sim" && len(sw.Interfaces) > 0 && sw.Workers < len(sw.Interfaces) {
		p.bad("software.workers", strconv.Itoa(sw.Workers), "the dv engine needs at least one worker per interface (%d)", len(sw.Interfaces))
	}
	if c.Offload.Backend == "sim" && sw.Engine != "dv" {
		p.bad("software.engine", sw.Engine, "offload.backend sim runs the dv engine over the NIC emulator: set engine dv")
	}
	if sw.Workers < 1 {
		p.bad("software.workers", strconv.Itoa(sw.Workers), "must be at least 1")
	}
	if sw.GHz < 0 {
		p.bad("software.ghz", fmt.Sprint(sw.GHz), "must not be negative")
	}
	if !(sw.CyclesPerPacket >= 0) || math.IsInf(float64(sw.CyclesPerPacket), 0) {
		p.bad("software.cycles_per_packet", fmt.Sprint(float64(sw.CyclesPerPacket)), "must be auto or a positive number")
	}
	if sw.ForwardTo != "" {
		if sw.Engine != "dv" && sw.Engine != "xdp" {
			p.bad("software.forward_to", sw.ForwardTo, "only the dv and xdp engines forward (engine is %s)", sw.Engine)
		}
		if msg := ifaceNameProblem(sw.ForwardTo); msg != "" {
			p.bad("software.forward_to", sw.ForwardTo, "not an interface name: %s", msg)
		}
		for _, i := range sw.Interfaces {
			if i == sw.ForwardTo {
				p.bad("software.forward_to", sw.ForwardTo, "is also in software.interfaces: frames would be sent back where they came from")
			}
		}
	}
	switch sw.BufferNode {
	case "", "worker", "device":
	default:
		p.bad("software.buffer_node", sw.BufferNode, "must be worker or device")
	}
	if n := sw.RxRingEntries; n != 0 && (n < 256 || n > 32768 || n&(n-1) != 0) {
		p.bad("software.rx_ring_entries", strconv.Itoa(n), "must be auto (0) or a power of 2 from 256 to 32768")
	}
	if !(sw.QueueDrainMpps >= 0) || math.IsInf(sw.QueueDrainMpps, 0) {
		p.bad("software.queue_drain_mpps", fmt.Sprint(sw.QueueDrainMpps), "must be 0 (unknown) or a positive number of Mpps")
	}
	if sw.Engine == "xdp" {
		switch {
		case !filepath.IsAbs(sw.XDPPinPath) || filepath.Clean(sw.XDPPinPath) != sw.XDPPinPath:
			p.bad("software.xdp_pin_path", sw.XDPPinPath, "must be a clean absolute path (a directory on a bpffs)")
		case strings.Contains(filepath.Base(sw.XDPPinPath), "."):
			p.bad("software.xdp_pin_path", sw.XDPPinPath, "the directory's name must not contain a dot: bpffs refuses such names")
		}
	}
	for i, name := range sw.Interfaces {
		if msg := ifaceNameProblem(name); msg != "" {
			p.bad(fmt.Sprintf("software.interfaces[%d]", i), name, "not an interface name: %s", msg)
		}
	}
}

// checkPlacement checks placement.*.
func (c *Config) checkPlacement(p *problems) {
	pl := &c.Place
	if pl.Interval <= 0 {
		p.bad("placement.interval", pl.Interval.String(), "must be positive")
	}
	if !(pl.HighWater > 0 && pl.HighWater <= 1) {
		p.bad("placement.high_water", fmt.Sprint(pl.HighWater), "must be in (0, 1]")
	}
	if !(pl.LowWater >= 0 && pl.LowWater < pl.HighWater) {
		p.bad("placement.low_water", fmt.Sprint(pl.LowWater), "must be in [0, high_water)")
	}
	if pl.MinDwell < 0 {
		p.bad("placement.min_dwell", pl.MinDwell.String(), "must not be negative")
	}
	if pl.MaxMovesPerRound < 1 {
		p.bad("placement.max_moves_per_round", strconv.Itoa(pl.MaxMovesPerRound), "must be at least 1")
	}
}

// checkShutdown checks shutdown.*.
func (c *Config) checkShutdown(p *problems) {
	if c.Shutdown.Timeout <= 0 {
		p.bad("shutdown.timeout", c.Shutdown.Timeout.String(), "must be positive")
	}
}

// ifaceNameProblem says why s cannot be a Linux interface name ("" if it
// can): at most 15 bytes (IFNAMSIZ less the NUL), no '/', ':' or
// whitespace, not "." or "..".
func ifaceNameProblem(s string) string {
	switch {
	case s == "":
		return "empty"
	case len(s) > 15:
		return "longer than 15 bytes"
	case s == "." || s == "..":
		return "reserved name"
	}
	for _, r := range s {
		if r == '/' || r == ':' || r <= ' ' || r == 0x7f {
			return fmt.Sprintf("contains %q", r)
		}
	}
	return ""
}

// Rules turns a protect entry into the accept rules that enforce it: one
// for traffic to the prefix (direction dst, the default), one for traffic
// from it (src), or both. Priority 0 and a place before every other rule
// make them decide first.
func (p Protect) Rules(id string) ([]rule.Rule, error) {
	pf, err := netip.ParsePrefix(p.Prefix)
	if err != nil {
		a, aerr := netip.ParseAddr(p.Prefix)
		if aerr != nil {
			return nil, fmt.Errorf("prefix %q: not a CIDR prefix or address", p.Prefix)
		}
		pf = netip.PrefixFrom(a, a.BitLen())
	}
	if pf.Masked() != pf {
		return nil, fmt.Errorf("prefix %q: host bits set (did you mean %s?)", p.Prefix, pf.Masked())
	}
	var m rule.Match
	if p.Proto != "" {
		r, err := rule.ParseRule("protect", fmt.Appendf(nil, `{id: x, action: accept, match: {proto: %q}}`, p.Proto), time.Time{})
		if err != nil {
			return nil, fmt.Errorf("proto %q: %v", p.Proto, err)
		}
		m.Proto = r.Match.Proto
	}
	for _, s := range p.Ports {
		r, err := rule.ParseRange(s, 65535)
		if err != nil {
			return nil, fmt.Errorf("port %q: %v", s, err)
		}
		m.Port = append(m.Port, r)
	}
	if m.Port != nil {
		if m.Proto == nil {
			m.Proto = []uint8{rule.ProtoTCP, rule.ProtoUDP, rule.ProtoSCTP}
		}
		for _, pr := range m.Proto {
			if pr != rule.ProtoTCP && pr != rule.ProtoUDP && pr != rule.ProtoSCTP {
				return nil, fmt.Errorf("ports need proto tcp, udp or sctp, not %s", rule.ProtoName(pr))
			}
		}
	}
	src, dst := m, m
	src.Src = pf
	dst.Dst = pf
	srcRule := rule.Rule{ID: id + "-src", Priority: 0, Action: rule.Accept, Match: src}
	dstRule := rule.Rule{ID: id + "-dst", Priority: 0, Action: rule.Accept, Match: dst}
	switch p.Direction {
	case "", "dst":
		return []rule.Rule{dstRule}, nil
	case "src":
		return []rule.Rule{srcRule}, nil
	case "both":
		return []rule.Rule{srcRule, dstRule}, nil
	}
	return nil, fmt.Errorf("direction %q: must be dst, src or both", p.Direction)
}
