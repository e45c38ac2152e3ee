package toolcmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// NewFlagSet returns a flag set for softnic's own command name (decode,
// demo, version) whose usage message, written to stderr, is synopsis
// followed by the flag defaults.
func NewFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("softnic "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: softnic %s\n", synopsis)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(fs.Output(), "\nFlags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// ParseArgs parses args with fs, allowing flags after positional
// arguments ("decode a.pcap --json"); "--" ends the flags. It returns the
// positional arguments, and the exit status to use when parsing failed or
// help was asked for (ok false).
func ParseArgs(fs *flag.FlagSet, args []string) (pos []string, status int, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, ExitOK, false
			}
			return nil, ExitUsage, false
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), ExitOK, true
		}
		if len(rest) == 0 {
			return pos, ExitOK, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
