// Package getopt parses command lines the way glibc's getopt_long(3) does,
// so softnic's rdma-core and perftest look-alikes accept exactly the
// command lines those tools accept: clustered short options ("-ec"),
// attached and detached arguments ("-s4096", "-s 4096"), long options with
// "=" or a separate argument ("--size=4096", "--size 4096"), unambiguous
// prefixes of long options ("--it 5" for "--iters"), operands anywhere
// (GNU argument permutation) and "--" to end the options.
//
// Numbers are read as strtoul(3) with base 0 reads them (decimal, 0x hex,
// leading-0 octal), but strictly: where the C tools silently take garbage
// as 0, [Uint] and [Int] return an error.
package getopt

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ArgKind says whether an option takes an argument.
type ArgKind uint8

const (
	NoArg       ArgKind = iota // no_argument
	RequiredArg                // required_argument
	OptionalArg                // optional_argument: only as "--long=value" or "-xvalue"
)

// Option describes one option. Short is 0 for a long-only option; Long is
// "" for a short-only one. Name identifies the option in results (the
// long name if there is one, else the short letter).
type Option struct {
	Short rune
	Long  string
	Arg   ArgKind
}

// Name returns the option's name: its long name, or its short letter.
func (o *Option) Name() string {
	if o.Long != "" {
		return o.Long
	}
	return string(o.Short)
}

// Spelling returns how usage text names the option: "-s/--size", "-e" or
// "--report_gbits".
func (o *Option) Spelling() string {
	switch {
	case o.Short != 0 && o.Long != "":
		return "-" + string(o.Short) + "/--" + o.Long
	case o.Short != 0:
		return "-" + string(o.Short)
	}
	return "--" + o.Long
}

// Match is one option found on the command line, in command-line order.
type Match struct {
	Opt    *Option
	Value  string // the argument; "" when none was given
	HasArg bool   // an argument was given (distinguishes "--x=" from "--x")
}

// Result is a parsed command line.
type Result struct {
	Matches  []Match
	Operands []string // non-option arguments, in order
}

// Has reports whether the option called name appeared.
func (r *Result) Has(name string) bool {
	_, ok := r.Last(name)
	return ok
}

// Count returns how many times the option called name appeared.
func (r *Result) Count(name string) int {
	n := 0
	for _, m := range r.Matches {
		if m.Opt.Name() == name {
			n++
		}
	}
	return n
}

// Last returns the last occurrence of the option called name: as with the
// C tools, a later option overrides an earlier one.
func (r *Result) Last(name string) (Match, bool) {
	for i := len(r.Matches) - 1; i >= 0; i-- {
		if r.Matches[i].Opt.Name() == name {
			return r.Matches[i], true
		}
	}
	return Match{}, false
}

// Error is a command-line error, worded as glibc's getopt words it.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

// ErrHelp is returned when -h or --help appears and no option claims it.
var ErrHelp = errors.New("help requested")

// Parse parses args (without the program name) against opts. -h and
// --help, unless opts defines them, return ErrHelp.
func Parse(opts []Option, args []string) (*Result, error) {
	r := &Result{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			r.Operands = append(r.Operands, args[i+1:]...)
			return r, nil
		case strings.HasPrefix(a, "--"):
			m, used, err := parseLong(opts, a[2:], args[i+1:])
			if err != nil {
				return r, err
			}
			i += used
			r.Matches = append(r.Matches, m)
		case len(a) > 1 && a[0] == '-':
			ms, used, err := parseShort(opts, a[1:], args[i+1:])
			r.Matches = append(r.Matches, ms...)
			if err != nil {
				return r, err
			}
			i += used
		default:
			r.Operands = append(r.Operands, a)
		}
	}
	return r, nil
}

// parseLong handles "--name[=value]"; rest are the arguments after it. It
// returns how many of rest it consumed.
func parseLong(opts []Option, s string, rest []string) (Match, int, error) {
	name, val, hasEq := strings.Cut(s, "=")
	o, err := lookupLong(opts, name)
	if err != nil {
		return Match{}, 0, err
	}
	if o == nil {
		return Match{}, 0, &Error{fmt.Sprintf("unrecognized option '--%s'", name)}
	}
	switch o.Arg {
	case NoArg:
		if hasEq {
			return Match{}, 0, &Error{fmt.Sprintf("option '--%s' doesn't allow an argument", o.Long)}
		}
		return Match{Opt: o}, 0, nil
	case OptionalArg:
		return Match{Opt: o, Value: val, HasArg: hasEq}, 0, nil
	}
	if hasEq {
		return Match{Opt: o, Value: val, HasArg: true}, 0, nil
	}
	if len(rest) == 0 {
		return Match{}, 0, &Error{fmt.Sprintf("option '--%s' requires an argument", o.Long)}
	}
	return Match{Opt: o, Value: rest[0], HasArg: true}, 1, nil
}

// lookupLong finds the long option name: an exact match, else the one
// option it is a prefix of. It returns nil, nil for no match and ErrHelp
// for an unclaimed "help".
func lookupLong(opts []Option, name string) (*Option, error) {
	var cands []*Option
	for i := range opts {
		o := &opts[i]
		if o.Long == "" {
			continue
		}
		if o.Long == name {
			return o, nil
		}
		if name != "" && strings.HasPrefix(o.Long, name) {
			cands = append(cands, o)
		}
	}
	switch len(cands) {
	case 0:
		if name != "" && strings.HasPrefix("help", name) {
			return nil, ErrHelp
		}
		return nil, nil
	case 1:
		return cands[0], nil
	}
	names := make([]string, len(cands))
	for i, o := range cands {
		names[i] = "'--" + o.Long + "'"
	}
	sort.Strings(names)
	return nil, &Error{fmt.Sprintf("option '--%s' is ambiguous; possibilities: %s", name, strings.Join(names, " "))}
}

// parseShort handles a cluster of short options ("ec", "s4096"); rest are
// the arguments after it. It returns the matches found before any error
// and how many of rest it consumed.
func parseShort(opts []Option, s string, rest []string) ([]Match, int, error) {
	var ms []Match
	for j, c := range s {
		o := lookupShort(opts, c)
		if o == nil {
			if c == 'h' {
				return ms, 0, ErrHelp
			}
			return ms, 0, &Error{fmt.Sprintf("invalid option -- '%c'", c)}
		}
		tail := s[j+len(string(c)):]
		switch o.Arg {
		case NoArg:
			ms = append(ms, Match{Opt: o})
			continue
		case OptionalArg:
			return append(ms, Match{Opt: o, Value: tail, HasArg: tail != ""}), 0, nil
		}
		if tail != "" {
			return append(ms, Match{Opt: o, Value: tail, HasArg: true}), 0, nil
		}
		if len(rest) == 0 {
			return ms, 0, &Error{fmt.Sprintf("option requires an argument -- '%c'", c)}
		}
		return append(ms, Match{Opt: o, Value: rest[0], HasArg: true}), 1, nil
	}
	return ms, 0, nil
}

func lookupShort(opts []Option, c rune) *Option {
	for i := range opts {
		if opts[i].Short == c {
			return &opts[i]
		}
	}
	return nil
}

// Uint parses s as strtoul(s, NULL, 0) would (decimal, 0x/0X hex, leading
// 0 octal), refusing anything that is not entirely a number.
func Uint(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimPrefix(t, "+")
	if t == "" {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	base := 10
	switch {
	case len(t) > 2 && (t[:2] == "0x" || t[:2] == "0X"):
		base, t = 16, t[2:]
	case len(t) > 1 && t[0] == '0':
		base, t = 8, t[1:]
	}
	v, err := strconv.ParseUint(t, base, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return 0, fmt.Errorf("%q is out of range", s)
		}
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return v, nil
}

// Int parses s as strtol(s, NULL, 0) would, strictly.
func Int(s string) (int64, error) {
	t := strings.TrimSpace(s)
	neg := strings.HasPrefix(t, "-")
	if neg {
		t = t[1:]
	}
	v, err := Uint(t)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if v > 1<<63 || (!neg && v == 1<<63) {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	if neg {
		return -int64(v), nil
	}
	return int64(v), nil
}
