// Package version holds what the build stamps into the binary: the release, the commit
// and the build date, set with -ldflags -X by the Makefile (make build). A binary built
// with plain `go build` reports "dev" and what the Go toolchain recorded.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set at build time: go build -ldflags "-X anchorage/internal/version.Version=v0.3.0 ...".
var (
	Version   = "dev"
	Commit    = ""
	BuildDate = ""
)

// Info is the build's identity.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	BuildDate string `json:"buildDate"`
	GoVersion string `json:"goVersion"`
}

// Get returns the stamped values, falling back to the VCS revision the Go toolchain
// recorded when the commit was not stamped.
func Get() Info {
	i := Info{Version: Version, Commit: Commit, BuildDate: BuildDate, GoVersion: runtime.Version()}
	if i.Commit == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					i.Commit = s.Value
				}
			}
		}
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	return i
}

// String is the one line `manager version` prints.
func (i Info) String() string {
	return fmt.Sprintf("anchorage %s (commit %s, built %s, %s)", i.Version, i.Commit, orUnknown(i.BuildDate), i.GoVersion)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
