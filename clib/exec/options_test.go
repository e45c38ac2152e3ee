package exec

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"
)

// Options read back from the variables Environ writes are the options.
func TestOptionsRoundTrip(t *testing.T) {
	for _, o := range []Options{
		{},
		{Addr: netip.MustParseAddr("10.1.2.3"), Port: 4792, Dev: "rxe0", MTU: 1024, BusyPoll: 50 * time.Microsecond,
			PollWait: true, Pcap: "/tmp/x-%p.pcap", Metrics: ":9100", MetricsFile: "/tmp/m", Debug: true},
		{Addr: netip.MustParseAddr("fd00::8")},
	} {
		env := map[string]string{}
		for _, kv := range o.Environ() {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		got, err := FromEnv(func(k string) string { return env[k] })
		if err != nil || got != o {
			t.Errorf("FromEnv(Environ(%+v)) = %+v, %v", o, got, err)
		}
	}
}

// A malformed variable is an error that names it.
func TestFromEnvErrors(t *testing.T) {
	for name, val := range map[string]string{
		EnvAddr: "nowhere", EnvPort: "0", EnvMTU: "1500", EnvBusyPoll: "fast", EnvDebug: "yes",
		EnvPollWait: "on",
	} {
		_, err := FromEnv(func(k string) string {
			if k == name {
				return val
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: err %v, want one naming the variable", name, val, err)
		}
	}
}

// Environ puts softnic's library first in LD_LIBRARY_PATH, before the
// program's own, and its variables win over inherited ones.
func TestEnviron(t *testing.T) {
	env := Environ([]string{"HOME=/root", "LD_LIBRARY_PATH=/opt/lib", "SOFTNIC_ADDR=10.0.0.1"},
		"/sn/lib", Options{Addr: netip.MustParseAddr("127.0.0.9")})
	for _, want := range []string{"HOME=/root", "LD_LIBRARY_PATH=/sn/lib:/opt/lib", "SOFTNIC_ADDR=127.0.0.9"} {
		if !slices.Contains(env, want) {
			t.Errorf("Environ = %q, lacks %q", env, want)
		}
	}
	if slices.Contains(env, "SOFTNIC_ADDR=10.0.0.1") {
		t.Errorf("Environ = %q keeps the inherited SOFTNIC_ADDR", env)
	}
}

// PcapPath makes one file per process of a pair.
func TestPcapPath(t *testing.T) {
	if p := (Options{Pcap: "/tmp/a-%p.pcap"}).PcapPath(); strings.Contains(p, "%p") || !strings.HasPrefix(p, "/tmp/a-") {
		t.Errorf("PcapPath = %q", p)
	}
}
