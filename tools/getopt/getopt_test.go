package getopt

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// pp is rc_pingpong's option table (rdma-core "p:d:i:s:m:r:n:l:eg:oOPtcjN").
var pp = []Option{
	{'p', "port", RequiredArg}, {'d', "ib-dev", RequiredArg}, {'i', "ib-port", RequiredArg},
	{'s', "size", RequiredArg}, {'m', "mtu", RequiredArg}, {'r', "rx-depth", RequiredArg},
	{'n', "iters", RequiredArg}, {'l', "sl", RequiredArg}, {'e', "events", NoArg},
	{'g', "gid-idx", RequiredArg}, {'c', "chk", NoArg}, {0, "addr", RequiredArg},
	{0, "report_gbits", NoArg}, {0, "report-both", NoArg}, {'x', "", OptionalArg},
}

func summary(r *Result) []string {
	var s []string
	for _, m := range r.Matches {
		v := m.Opt.Name()
		if m.HasArg {
			v += "=" + m.Value
		}
		s = append(s, v)
	}
	return append(s, "|"+strings.Join(r.Operands, ","))
}

func TestParse(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{nil, []string{"|"}},
		{[]string{"-s", "4096", "host"}, []string{"size=4096", "|host"}},
		{[]string{"-s4096", "-n5"}, []string{"size=4096", "iters=5", "|"}},
		{[]string{"-ec", "-g", "1"}, []string{"events", "chk", "gid-idx=1", "|"}},
		{[]string{"-ecg1"}, []string{"events", "chk", "gid-idx=1", "|"}},
		{[]string{"-ecg", "1"}, []string{"events", "chk", "gid-idx=1", "|"}},
		{[]string{"--size=64", "--iters", "7"}, []string{"size=64", "iters=7", "|"}},
		{[]string{"host", "-n", "3"}, []string{"iters=3", "|host"}},
		{[]string{"--it", "3"}, []string{"iters=3", "|"}},
		{[]string{"--ch"}, []string{"chk", "|"}},
		{[]string{"--", "-n", "3"}, []string{"|-n,3"}},
		{[]string{"-"}, []string{"|-"}},
		{[]string{"--size="}, []string{"size=", "|"}},
		{[]string{"-x", "a"}, []string{"x", "|a"}},
		{[]string{"-xval"}, []string{"x=val", "|"}},
		{[]string{"--addr", "127.0.0.2", "10.0.0.1"}, []string{"addr=127.0.0.2", "|10.0.0.1"}},
		{[]string{"--report_gbits"}, []string{"report_gbits", "|"}},
	}
	for _, tt := range tests {
		r, err := Parse(pp, tt.args)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.args, err)
			continue
		}
		if got := summary(r); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Parse(%q): got %q, want %q", tt.args, got, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-z"}, "invalid option -- 'z'"},
		{[]string{"-ez"}, "invalid option -- 'z'"},
		{[]string{"-s"}, "option requires an argument -- 's'"},
		{[]string{"--size"}, "option '--size' requires an argument"},
		{[]string{"--events=1"}, "option '--events' doesn't allow an argument"},
		{[]string{"--frob"}, "unrecognized option '--frob'"},
		{[]string{"--report"}, "option '--report' is ambiguous; possibilities: '--report-both' '--report_gbits'"},
	}
	for _, tt := range tests {
		_, err := Parse(pp, tt.args)
		var e *Error
		if !errors.As(err, &e) || e.Msg != tt.want {
			t.Errorf("Parse(%q): got error %v, want %q", tt.args, err, tt.want)
		}
	}
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-eh"}, {"host", "--he"}} {
		if _, err := Parse(pp, args); !errors.Is(err, ErrHelp) {
			t.Errorf("Parse(%q): got %v, want ErrHelp", args, err)
		}
	}
}

func TestLast(t *testing.T) {
	r, err := Parse(pp, []string{"-n", "1", "-e", "--iters=2", "-e"})
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := r.Last("iters"); !ok || m.Value != "2" {
		t.Errorf("Last(iters): got %+v %v, want 2", m, ok)
	}
	if got := r.Count("events"); got != 2 {
		t.Errorf("Count(events): got %d, want 2", got)
	}
	if r.Has("size") {
		t.Error("Has(size): got true, want false")
	}
}

func TestNumbers(t *testing.T) {
	for s, want := range map[string]uint64{"0": 0, "18515": 18515, "0x10": 16, "0X1f": 31, "010": 8, "+7": 7, " 5": 5} {
		got, err := Uint(s)
		if err != nil || got != want {
			t.Errorf("Uint(%q): got %d, %v, want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "abc", "12k", "0x", "09", "-1", "99999999999999999999"} {
		if _, err := Uint(s); err == nil {
			t.Errorf("Uint(%q): got no error", s)
		}
	}
	for s, want := range map[string]int64{"-1": -1, "0x10": 16, "-010": -8, "-9223372036854775808": -1 << 63} {
		got, err := Int(s)
		if err != nil || got != want {
			t.Errorf("Int(%q): got %d, %v, want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"--1", "x", "9223372036854775808"} {
		if _, err := Int(s); err == nil {
			t.Errorf("Int(%q): got no error", s)
		}
	}
}
