package packet

// ParseSlow exposes the general parser so tests can compare the fast path
// with it.
var ParseSlow = parseSlow
