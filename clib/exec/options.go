// Package exec runs unmodified libibverbs programs over softnic: softnic
// exec sets the environment that makes a dynamically linked program load
// softnic's libibverbs.so.1 (LD_LIBRARY_PATH) and configures the NIC that
// library brings up (the SOFTNIC_* variables, Options), then executes the
// program. The library reads the same variables with FromEnv, so a program
// started any other way with them set behaves the same.
package exec

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// The environment variables softnic's libibverbs reads. Each is optional.
const (
	// EnvAddr is the NIC's IP address (its GID). Unset, the NIC takes
	// the first loopback address from 127.0.0.1 up whose UDP port is
	// free, so two programs on one host pair without configuration.
	EnvAddr = "SOFTNIC_ADDR"
	// EnvPort is the UDP port the NIC receives on and sends to (4791).
	EnvPort = "SOFTNIC_PORT"
	// EnvDev is the device name ibv_get_device_list reports (softnic0).
	EnvDev = "SOFTNIC_DEV"
	// EnvMTU fixes the port's active MTU in bytes (256, 512, 1024, 2048
	// or 4096); unset, it follows the interface's MTU as rxe's does.
	EnvMTU = "SOFTNIC_MTU"
	// EnvBusyPoll is how long blocking waits poll the link before they
	// sleep, a Go duration ("50us"); verbs.Config.BusyPoll.
	EnvBusyPoll = "SOFTNIC_BUSY_POLL"
	// EnvPollWait, set to 1, has ibv_poll_cq, once a CQ has polled
	// empty for 50 µs, first wait up to 50 µs for the link to bring
	// something at each empty poll (clib/libibverbs/cq.c); unset, polls
	// of an empty CQ spin for as long as the program polls.
	EnvPollWait = "SOFTNIC_POLL_WAIT"
	// EnvPcap names a pcap file that receives every datagram the NIC
	// sends and receives; "%p" in it becomes the process ID.
	EnvPcap = "SOFTNIC_PCAP"
	// EnvMetrics is an address to serve Prometheus metrics on;
	// EnvMetricsFile a file that receives them when the NIC closes.
	EnvMetrics     = "SOFTNIC_METRICS"
	EnvMetricsFile = "SOFTNIC_METRICS_FILE"
	// EnvDebug, set to 1, has the library print why each refused call
	// failed (the engine's error text behind the errno) to stderr.
	EnvDebug = "SOFTNIC_DEBUG"
	// EnvEngine names the engine library (libsoftnic.so) when it is not
	// beside libibverbs.so.1.
	EnvEngine = "SOFTNIC_ENGINE"
)

// DefaultDev is the device name when EnvDev is unset.
const DefaultDev = "softnic0"

// Options configure the NIC of a program run over softnic.
type Options struct {
	Addr        netip.Addr    // EnvAddr; the zero Addr picks a free loopback address
	Port        uint16        // EnvPort; 0 is 4791
	Dev         string        // EnvDev; "" is DefaultDev
	MTU         int           // EnvMTU in bytes; 0 follows the interface
	BusyPoll    time.Duration // EnvBusyPoll
	PollWait    bool          // EnvPollWait
	Pcap        string        // EnvPcap
	Metrics     string        // EnvMetrics
	MetricsFile string        // EnvMetricsFile
	Debug       bool          // EnvDebug
}

// FromEnv reads Options from the environment getenv gives (os.Getenv).
func FromEnv(getenv func(string) string) (Options, error) {
	var o Options
	var err error
	if s := getenv(EnvAddr); s != "" {
		if o.Addr, err = netip.ParseAddr(s); err != nil {
			return o, fmt.Errorf("%s=%q: not an IP address", EnvAddr, s)
		}
		o.Addr = o.Addr.Unmap()
	}
	if s := getenv(EnvPort); s != "" {
		p, err := strconv.ParseUint(s, 10, 16)
		if err != nil || p == 0 {
			return o, fmt.Errorf("%s=%q: not a UDP port", EnvPort, s)
		}
		o.Port = uint16(p)
	}
	o.Dev = getenv(EnvDev)
	if s := getenv(EnvMTU); s != "" {
		m, err := strconv.Atoi(s)
		if err != nil || (m != 256 && m != 512 && m != 1024 && m != 2048 && m != 4096) {
			return o, fmt.Errorf("%s=%q: the MTU is 256, 512, 1024, 2048 or 4096", EnvMTU, s)
		}
		o.MTU = m
	}
	if s := getenv(EnvBusyPoll); s != "" {
		if o.BusyPoll, err = time.ParseDuration(s); err != nil || o.BusyPoll < 0 {
			return o, fmt.Errorf("%s=%q: not a duration (50us, 1ms)", EnvBusyPoll, s)
		}
	}
	switch s := getenv(EnvPollWait); s {
	case "", "0":
	case "1":
		o.PollWait = true
	default:
		return o, fmt.Errorf("%s=%q: 0 or 1", EnvPollWait, s)
	}
	o.Pcap = getenv(EnvPcap)
	o.Metrics = getenv(EnvMetrics)
	o.MetricsFile = getenv(EnvMetricsFile)
	switch s := getenv(EnvDebug); s {
	case "", "0":
	case "1":
		o.Debug = true
	default:
		return o, fmt.Errorf("%s=%q: 0 or 1", EnvDebug, s)
	}
	return o, nil
}

// Environ returns the variables that set o, for a child's environment:
// one NAME=value string per option that is set.
func (o Options) Environ() []string {
	var env []string
	add := func(name, v string) {
		if v != "" {
			env = append(env, name+"="+v)
		}
	}
	if o.Addr.IsValid() {
		add(EnvAddr, o.Addr.String())
	}
	if o.Port != 0 {
		add(EnvPort, strconv.Itoa(int(o.Port)))
	}
	add(EnvDev, o.Dev)
	if o.MTU != 0 {
		add(EnvMTU, strconv.Itoa(o.MTU))
	}
	if o.BusyPoll != 0 {
		add(EnvBusyPoll, o.BusyPoll.String())
	}
	if o.PollWait {
		add(EnvPollWait, "1")
	}
	add(EnvPcap, o.Pcap)
	add(EnvMetrics, o.Metrics)
	add(EnvMetricsFile, o.MetricsFile)
	if o.Debug {
		add(EnvDebug, "1")
	}
	return env
}

// PcapPath returns the pcap file name with "%p" replaced by the process ID.
func (o Options) PcapPath() string {
	return strings.ReplaceAll(o.Pcap, "%p", strconv.Itoa(os.Getpid()))
}
