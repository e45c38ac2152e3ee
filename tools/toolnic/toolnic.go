// Package toolnic is what every softnic tool runs on: the environment a
// tool takes (Env: its output, its NIC and connection manager, the
// bounds of its waits), and the NIC it opens (rc_pingpong, write_bw,
// info, ...): a device brought up on a link made by an injectable
// LinkFunc (UDP on port 4791 by default, the in-memory fabric in tests),
// optionally teeing its traffic into a pcap file and exporting its
// counters; a waiter for completions that does not burn a CPU; and the
// transport's verdict on a peer that stopped answering. The tools' logic
// lives in the other packages of tools/, each with its command
// (tools/toolcmd); cmd/softnic only dispatches (STYLE.md 23).
package toolnic

import (
	"bufio"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/softnic/softnic/capture"
	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/link"
	"github.com/softnic/softnic/metrics"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/wire"
)

// LinkFunc opens the link a NIC at addr uses; port is the UDP port the
// NIC receives on (wire.UDPPort unless a test moves it).
type LinkFunc func(addr netip.Addr, port uint16) (link.Link, error)

// Config says where and how to open a NIC.
type Config struct {
	// Addr is the NIC's IP address (and so its GID).
	Addr netip.Addr
	// Port is the UDP port the NIC receives on; 0 means 4791.
	Port uint16
	// PeerPort is the UDP port the NIC sends to; 0 means Port. Two NICs
	// on one address (IPv6 loopback) need two ports.
	PeerPort uint16
	// Link opens the link; nil means UDP (see UDP).
	Link LinkFunc
	// Pcap, when set, names a file that receives every datagram the NIC
	// sends and receives.
	Pcap string
	// Metrics, when set, is the address to serve Prometheus metrics on.
	Metrics string
	// MetricsFile, when set, names a file that receives the same metrics
	// in Prometheus's text format when the NIC closes: the run's final
	// counters, for a run too short or too remote to scrape.
	MetricsFile string
	// Name is the device name; "" means "softnic0".
	Name string
	// BusyPoll is the device's verbs.Config.BusyPoll: how long a blocking
	// wait polls the link before it sleeps (--busy-poll).
	BusyPoll time.Duration
	// PortMTU is the device's verbs.Config.PortMTU: the port's active
	// MTU, 0 to follow the interface's.
	PortMTU ibv.MTU
	// CC is the device's verbs.Config.CC, congestion control (--cc,
	// --cc-param); nil: off. With it the UDP link marks its packets
	// ECN-capable by default (link.UDPConfig.ECN).
	CC *ibv.CCParams
	// Detached brings the NIC up on a private in-memory link instead of
	// the network: enough to query its attributes (softnic info) without
	// binding a port.
	Detached bool
	// Unpolled opens the UDP link with its socket out of Go's netpoller
	// (link.UDPConfig.Unpolled): for softnic's libibverbs, whose engine
	// runs with at least two Ps beside the program's polling thread.
	Unpolled bool
}

// NIC is an open device and what was opened with it.
type NIC struct {
	Dev *verbs.Device

	pcapFile *os.File
	pcapBuf  *bufio.Writer
	pcapLink *link.PcapLink
	metrics  func() // stops the metrics server

	reg         *prometheus.Registry // the metrics, when asked for
	metricsFile string
}

// UDP opens the UDP link of a NIC (link.ListenUDP); cmd/softnic's
// default.
var UDP LinkFunc = func(addr netip.Addr, port uint16) (link.Link, error) {
	return link.ListenUDP(link.UDPConfig{Addr: addr, Port: port})
}

// udpWith returns the opener of a UDP link whose socket marks what it
// sends ECT(0) (ecn: a NIC running congestion control) and is out of
// Go's netpoller (unpolled: Config.Unpolled).
func udpWith(ecn, unpolled bool) LinkFunc {
	return func(addr netip.Addr, port uint16) (link.Link, error) {
		return link.ListenUDP(link.UDPConfig{Addr: addr, Port: port, ECN: ecn, Unpolled: unpolled})
	}
}

// ErrAddrInUse reports that the NIC's UDP port is taken.
type ErrAddrInUse struct {
	Addr netip.Addr
	Port uint16
	Err  error
}

func (e *ErrAddrInUse) Error() string {
	return fmt.Sprintf("UDP port %d on %v is already in use (another softnic, or the kernel's rdma_rxe, holds it; pick another --addr): %v", e.Port, e.Addr, e.Err)
}

func (e *ErrAddrInUse) Unwrap() error { return e.Err }

// Open brings a NIC up as cfg says.
func Open(cfg Config) (*NIC, error) {
	if !cfg.Addr.IsValid() {
		return nil, errors.New("no NIC address (--addr)")
	}
	if cfg.Port == 0 {
		cfg.Port = wire.UDPPort
	}
	if cfg.PeerPort == 0 {
		cfg.PeerPort = cfg.Port
	}
	mk := cfg.Link
	if cfg.Detached {
		f := fabric.New(fabric.Config{})
		mk = func(a netip.Addr, _ uint16) (link.Link, error) {
			ep, err := f.Attach(a)
			if err != nil {
				return nil, err
			}
			// The port MTU follows the interface holding the address,
			// as it would on the UDP link; an address no interface
			// holds keeps the fabric's default.
			if _, mtu, err := link.InterfaceMTU(a); err == nil {
				ep.SetMTU(mtu)
			}
			return ep, nil
		}
	} else if mk == nil {
		mk = UDP
		if cfg.CC != nil || cfg.Unpolled {
			mk = udpWith(cfg.CC != nil, cfg.Unpolled)
		}
	}
	lk, err := mk(cfg.Addr, cfg.Port)
	inner := lk
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, &ErrAddrInUse{Addr: cfg.Addr, Port: cfg.Port, Err: err}
		}
		if errors.Is(err, syscall.EADDRNOTAVAIL) {
			return nil, fmt.Errorf("address %v is not an address of this host (%w)", cfg.Addr, err)
		}
		return nil, fmt.Errorf("opening the link on %v: %w", cfg.Addr, err)
	}
	n := &NIC{}
	if cfg.Pcap != "" {
		f, err := os.Create(cfg.Pcap)
		if err != nil {
			lk.Close()
			return nil, fmt.Errorf("pcap: %w", err)
		}
		buf := bufio.NewWriterSize(f, 1<<16)
		w, err := capture.NewWriter(buf, capture.DefaultLinkType)
		if err != nil {
			f.Close()
			lk.Close()
			return nil, fmt.Errorf("pcap: %w", err)
		}
		n.pcapFile, n.pcapBuf = f, buf
		n.pcapLink = link.NewPcapLink(lk, w)
		lk = n.pcapLink
	}
	dev, err := verbs.Open(verbs.Config{Link: lk, PeerPort: cfg.PeerPort, Name: cfg.Name, BusyPoll: cfg.BusyPoll, PortMTU: cfg.PortMTU, CC: cfg.CC})
	if err != nil {
		lk.Close()
		n.closePcap()
		return nil, fmt.Errorf("opening the device: %w", err)
	}
	n.Dev = dev
	if cfg.Metrics != "" || cfg.MetricsFile != "" {
		reg := prometheus.NewRegistry()
		err := metrics.Register(reg, dev)
		if ls, ok := inner.(metrics.LinkStatser); ok && err == nil {
			err = reg.Register(metrics.NewLinkCollector(dev.Name(), ls))
		}
		if err == nil && cfg.MetricsFile != "" {
			// Created now, so that a path that cannot be written fails
			// the start, not the end of a long run.
			var f *os.File
			if f, err = os.Create(cfg.MetricsFile); err == nil {
				err = f.Close()
			}
			if err != nil {
				err = fmt.Errorf("--metrics-file: %w", err)
			}
		}
		if err == nil && cfg.Metrics != "" {
			n.metrics, err = metrics.Serve(cfg.Metrics, reg)
			if err != nil {
				err = fmt.Errorf("--metrics %s: %w", cfg.Metrics, err)
			}
		}
		if err != nil {
			n.Close()
			return nil, err
		}
		n.reg, n.metricsFile = reg, cfg.MetricsFile
	}
	return n, nil
}

// Close stops the metrics server, the device and its link, and finishes
// the pcap file. It returns the first error, including a pcap record that
// could not be written.
func (n *NIC) Close() error {
	var errs []error
	if n.metrics != nil {
		n.metrics()
	}
	if n.Dev != nil {
		// Device.Close flushes the packets its processors built before
		// it closes the link, so a UC or UD send completed just before
		// still reaches the peer.
		errs = append(errs, n.Dev.Close())
	}
	if n.metricsFile != "" {
		// After the device closed: the counters are final, those
		// last packets in them.
		errs = append(errs, n.writeMetrics())
	}
	errs = append(errs, n.closePcap())
	return errors.Join(errs...)
}

// writeMetrics writes the metrics to the --metrics-file, once.
func (n *NIC) writeMetrics() error {
	path := n.metricsFile
	n.metricsFile = ""
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--metrics-file: %w", err)
	}
	err = metrics.WriteText(f, n.reg)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--metrics-file %s: %w", path, err)
	}
	return nil
}

func (n *NIC) closePcap() error {
	if n.pcapFile == nil {
		return nil
	}
	var errs []error
	if n.pcapLink != nil {
		errs = append(errs, n.pcapLink.Err())
	}
	errs = append(errs, n.pcapBuf.Flush(), n.pcapFile.Close())
	n.pcapFile = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pcap: %w", err)
	}
	return nil
}
