package nic_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/softnic/softnic/fabric"
	"github.com/softnic/softnic/internal/errno"
	"github.com/softnic/softnic/internal/nic"
	"github.com/softnic/softnic/link"
)

// TestLinkClaimedThroughWrappers: a link is one NIC's even behind a
// PcapLink (which says what it wraps), and free again once that NIC is
// closed.
func TestLinkClaimedThroughWrappers(t *testing.T) {
	f := fabric.New(fabric.Config{})
	defer f.Close()
	ep, err := f.Attach(netip.MustParseAddr("10.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	n1, err := nic.New(nic.Config{Link: link.NewPcapLink(ep, nil), Name: "pcap0", Processors: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = nic.New(nic.Config{Link: ep, Name: "plain0", Processors: 1})
	if !errors.Is(err, errno.Busy) || !strings.Contains(err.Error(), "already in use by device pcap0") {
		t.Errorf("New on the link a PcapLink wraps: %v, want errno.Busy naming pcap0", err)
	}
	if err := n1.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = nic.New(nic.Config{Link: ep, Processors: 1})
	if !errors.Is(err, nic.ErrClosed) {
		t.Errorf("New on the link closed with pcap0: %v, want ErrClosed", err)
	}
}
