// Package version holds scrubd's build identity. deploy/build.sh sets the
// three variables with -ldflags "-X github.com/scrubd/scrubd/agent/version.Version=…";
// a plain `go build` leaves them at their defaults and String falls back to
// what the Go toolchain recorded in the binary (module version, VCS revision
// when built with -buildvcs).
package version

import (
	"runtime"
	"runtime/debug"
)

// Set at link time by deploy/build.sh. They are variables, not constants,
// so that -ldflags -X can replace them.
var (
	// Version is the release (a git describe string, e.g. v0.3.1-4-gabc1234).
	Version = "dev"
	// Commit is the full git commit the binary was built from.
	Commit = ""
	// Date is the build time, RFC 3339 in UTC.
	Date = ""
)

// Info is the build identity in structured form (for `scrubd version --json`
// and the scrubd_info metric).
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Date      string `json:"date,omitempty"`
	GoVersion string `json:"go"`
	Platform  string `json:"platform"`
	// Tags are the build tags that change behaviour (mlx5: the cgo verbs
	// setup is linked in).
	Tags string `json:"tags,omitempty"`
	CGO  bool   `json:"cgo"`
}

// Get returns the identity of the running binary. Fields that were not set
// at link time are filled from the build information the toolchain embeds.
func Get() Info {
	in := Info{Version: Version, Commit: Commit, Date: Date,
		GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	if in.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		in.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if in.Commit == "" {
				in.Commit = s.Value
			}
		case "vcs.time":
			if in.Date == "" {
				in.Date = s.Value
			}
		case "-tags":
			in.Tags = s.Value
		case "CGO_ENABLED":
			in.CGO = s.Value == "1"
		}
	}
	return in
}

// String is the one line `scrubd version` prints, e.g.
// "scrubd v0.3.1 (commit 1a2b3c4d5e6f, built 2026-01-02T03:04:05Z, go1.26.8, linux/arm64, tags mlx5)".
func String() string { return Get().String() }

// String formats the identity as one line.
func (in Info) String() string {
	s := "scrubd " + in.Version + " ("
	if in.Commit != "" {
		c := in.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		s += "commit " + c + ", "
	}
	if in.Date != "" {
		s += "built " + in.Date + ", "
	}
	s += in.GoVersion + ", " + in.Platform
	if in.Tags != "" {
		s += ", tags " + in.Tags
	}
	if in.CGO {
		s += ", cgo"
	}
	return s + ")"
}
