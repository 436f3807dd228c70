package main

import (
	"runtime/debug"
)

// buildVersion is set at link time by `make build` and `make image`
// (-ldflags "-X main.buildVersion=..."); without it opi reports what Go's build info knows.
var buildVersion string

// version is opi's version: the linked-in one, else the module version or VCS revision Go
// recorded in the binary, else "devel".
func version() string {
	if buildVersion != "" {
		return buildVersion
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var revision, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "-dirty"
			}
		}
	}
	if revision != "" {
		return "devel-" + revision + modified
	}
	return "devel"
}
