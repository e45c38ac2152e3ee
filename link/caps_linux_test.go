package link_test

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/softnic/softnic/link"
)

// udpCapRows are TestCapabilities' rows of the UDP link, with GRO and
// without (it lends only with GRO), and under the pcap recorder.
func udpCapRows() []capRow {
	udpIs := []string{"Poller", "Multicaster", "BusyPollPreferrer", "ReadYielder", "ReadWaker",
		"Sequencer", "Lender", "SplitSender", "LinkCloser", "StateWatcher", "ErrorWatcher", "Resolver"}
	// udpSay is what the UDP link answers: lend with GRO; split sends
	// only bare (the pcap recorder records Buf alone).
	udpSay := func(lend, split bool) []string {
		s := []string{"CanPoll", "CanMulticast", "PreferBusyPoll", "SetReadYield", "WakeRead", "NextSeq"}
		if lend {
			s = append(s, "Lend")
		}
		if split {
			s = append(s, "CanSendSplit")
		}
		return append(s, "State", "WatchState", "WatchSendErrors", "ResolveRoute")
	}
	gro := udpGRO()
	noGRO := link.UDPConfig{DisableGRO: true}
	return []capRow{
		{name: "udp", link: udpLink(link.UDPConfig{}), is: udpIs, say: udpSay(gro, true)},
		{name: "udp-nogro", link: udpLink(noGRO), is: udpIs, say: udpSay(false, true)},
		{name: "pcap(udp)", link: pcap(udpLink(link.UDPConfig{})), is: pcapIs, say: udpSay(gro, false)},
		{name: "pcap(udp-nogro)", link: pcap(udpLink(noGRO)), is: pcapIs, say: udpSay(false, false)},
		{name: "pcap(pcap(udp))", link: pcap(pcap(udpLink(link.UDPConfig{}))), is: pcapIs, say: udpSay(gro, false)},
	}
}

// udpGRO reports whether a UDP link on loopback gets GRO from the kernel.
func udpGRO() bool {
	l, err := listenLoopback(link.UDPConfig{})
	if err != nil {
		return false
	}
	defer l.Close()
	return l.GRO()
}

// udpLink returns a maker of a UDP link on 127.0.0.1 with cfg.
func udpLink(cfg link.UDPConfig) func(*testing.T) link.Link {
	return func(t *testing.T) link.Link {
		l, err := listenLoopback(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
}

// listenLoopback opens a UDP link with cfg on 127.0.0.1 and a free port.
func listenLoopback(cfg link.UDPConfig) (*link.UDPLink, error) {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	cfg.Addr = netip.MustParseAddr("127.0.0.1")
	for range 100 {
		cfg.Port = uint16(20000 + r.IntN(30000))
		l, err := link.ListenUDP(cfg)
		if !errors.Is(err, syscall.EADDRINUSE) {
			return l, err
		}
	}
	return nil, errors.New("no free UDP port on 127.0.0.1")
}
