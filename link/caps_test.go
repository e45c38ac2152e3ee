package link_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/link"
)

// capabilities are the optional interfaces of caps.go, by name: what a
// link's type says it may do.
var capabilities = []struct {
	name string
	is   func(link.Link) bool
}{
	{"Poller", func(l link.Link) bool { _, ok := l.(link.Poller); return ok }},
	{"ConditionalPoller", func(l link.Link) bool { _, ok := l.(link.ConditionalPoller); return ok }},
	{"Multicaster", func(l link.Link) bool { _, ok := l.(link.Multicaster); return ok }},
	{"ConditionalMulticaster", func(l link.Link) bool { _, ok := l.(link.ConditionalMulticaster); return ok }},
	{"BusyPollPreferrer", func(l link.Link) bool { _, ok := l.(link.BusyPollPreferrer); return ok }},
	{"ReadYielder", func(l link.Link) bool { _, ok := l.(link.ReadYielder); return ok }},
	{"ReadWaker", func(l link.Link) bool { _, ok := l.(link.ReadWaker); return ok }},
	{"Sequencer", func(l link.Link) bool { _, ok := l.(link.Sequencer); return ok }},
	{"Lender", func(l link.Link) bool { _, ok := l.(link.Lender); return ok }},
	{"SplitSender", func(l link.Link) bool { _, ok := l.(link.SplitSender); return ok }},
	{"LinkCloser", func(l link.Link) bool { _, ok := l.(link.LinkCloser); return ok }},
	{"Unwrapper", func(l link.Link) bool { _, ok := l.(link.Unwrapper); return ok }},
	{"StateWatcher", func(l link.Link) bool { _, ok := l.(link.StateWatcher); return ok }},
	{"ErrorWatcher", func(l link.Link) bool { _, ok := l.(link.ErrorWatcher); return ok }},
	{"Resolver", func(l link.Link) bool { _, ok := l.(link.Resolver); return ok }},
}

// answers are the package's capability functions, by name: what the
// engine hears when it asks a live link, through any wrapper.
var answers = []struct {
	name string
	ask  func(link.Link) bool
}{
	{"CanPoll", link.CanPoll},
	{"CanMulticast", link.CanMulticast},
	{"PreferBusyPoll", link.PreferBusyPoll},
	{"SetReadYield", func(l link.Link) bool { return link.SetReadYield(l, nil) }},
	{"WakeRead", link.WakeRead},
	{"NextSeq", func(l link.Link) bool { _, ok := link.NextSeq(l); return ok }},
	{"Lend", link.Lend},
	{"CanSendSplit", link.CanSendSplit},
	{"State", func(l link.Link) bool { _, ok := link.State(l); return ok }},
	{"WatchState", func(l link.Link) bool { stop, ok := link.WatchState(l, func() {}); stop(); return ok }},
	{"WatchSendErrors", func(l link.Link) bool {
		stop, ok := link.WatchSendErrors(l, func(link.SendError) {})
		stop()
		return ok
	}},
	{"ResolveRoute", func(l link.Link) bool {
		_, err := link.ResolveRoute(context.Background(), l, l.LocalAddr())
		return !errors.Is(err, link.ErrNoRouting)
	}},
}

// capRow is one link and what it must have and answer, exactly.
type capRow struct {
	name    string
	link    func(t *testing.T) link.Link
	is, say []string
}

var (
	// pcapIs is the method set of a PcapLink, whatever it wraps.
	pcapIs = []string{"Poller", "ConditionalPoller", "Multicaster", "ConditionalMulticaster",
		"BusyPollPreferrer", "ReadYielder", "ReadWaker", "Sequencer", "Lender", "Unwrapper",
		"StateWatcher", "ErrorWatcher", "Resolver"}
	fabricIs  = []string{"Poller", "Multicaster", "Sequencer", "LinkCloser", "StateWatcher", "ErrorWatcher"}
	fabricSay = []string{"CanPoll", "CanMulticast", "NextSeq", "State", "WatchState", "WatchSendErrors"}
)

// TestCapabilities checks the table of caps.go: each link type has
// exactly the capabilities it should, and the pcap recorder, over each
// link and over itself, answers for every one of them what the link it
// wraps answers (but CanSendSplit, which it never has), so a capability
// lost in a wrapper fails here.
func TestCapabilities(t *testing.T) {
	rows := []capRow{
		{name: "fabric", link: fabricLink, is: fabricIs, say: fabricSay},
		{name: "pcap(fabric)", link: pcap(fabricLink), is: pcapIs, say: fabricSay},
		{name: "pcap(pcap(fabric))", link: pcap(pcap(fabricLink)), is: pcapIs, say: fabricSay},
		{name: "bare", link: func(*testing.T) link.Link { return bareLink{} }},
		{name: "pcap(bare)", link: pcap(func(*testing.T) link.Link { return bareLink{} }), is: pcapIs},
	}
	rows = append(rows, udpCapRows()...)
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			l := r.link(t)
			var is, say []string
			for _, c := range capabilities {
				if c.is(l) {
					is = append(is, c.name)
				}
			}
			for _, a := range answers {
				if a.ask(l) {
					say = append(say, a.name)
				}
			}
			if !slices.Equal(is, r.is) {
				t.Errorf("implements %v, want %v", is, r.is)
			}
			if !slices.Equal(say, r.say) {
				t.Errorf("answers yes to %v, want %v", say, r.say)
			}
		})
	}
}

// fabricLink returns an endpoint of a fabric of its own.
func fabricLink(t *testing.T) link.Link {
	f := fabric.New(fabric.Config{})
	t.Cleanup(func() { f.Close() })
	e, err := f.Attach(netip.MustParseAddr("192.0.2.1"))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// pcap returns mk's link wrapped in a PcapLink recording nowhere.
func pcap(mk func(*testing.T) link.Link) func(*testing.T) link.Link {
	return func(t *testing.T) link.Link { return link.NewPcapLink(mk(t), nil) }
}

// bareLink is a Link with no optional capability.
type bareLink struct{}

func (bareLink) ReadBatch([]link.Datagram) (int, error)  { return 0, link.ErrLinkClosed }
func (bareLink) WriteBatch([]link.Datagram) (int, error) { return 0, link.ErrLinkClosed }
func (bareLink) BatchSize() int                          { return 1 }
func (bareLink) LocalAddr() netip.Addr                   { return netip.MustParseAddr("192.0.2.9") }
func (bareLink) SrcPort() uint16                         { return 0 }
func (bareLink) MTU() int                                { return 1500 }
func (bareLink) Close() error                            { return nil }
