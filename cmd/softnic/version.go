package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/softnic/softnic/tools/toolcmd"
	"github.com/softnic/softnic/tools/toolnic"
)

// version is the release version, set at link time with
// -ldflags "-X main.version=v1.2.3"; empty means the module's build info.
var version string

// runVersion implements "softnic version".
func runVersion(env *toolnic.Env, args []string) int {
	fs := toolcmd.NewFlagSet("version", "version\n\nPrints the softnic version, the Go version and the VCS revision.", env.Err)
	rest, status, ok := toolcmd.ParseArgs(fs, args)
	if !ok {
		return status
	}
	if len(rest) > 0 {
		fmt.Fprintf(env.Err, "softnic version: unexpected argument %q\n", rest[0])
		return exitUsage
	}
	fmt.Fprintln(env.Out, versionString())
	return exitOK
}

// versionString returns "softnic VERSION GOVERSION OS/ARCH [rev REV[+dirty]]".
func versionString() string {
	v, rev, dirty := version, "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	s := fmt.Sprintf("softnic %s %s %s/%s", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "+dirty"
		}
		s += " rev " + rev
	}
	return s
}
