//go:build !linux

package link

import (
	"errors"
	"net/netip"
)

// errNoUDP is ListenUDP's error where the UDP link is not implemented: it
// needs Linux's recvmmsg/sendmmsg, UDP GSO/GRO and control messages.
var errNoUDP = errors.New("nic: the UDP link needs Linux")

// UDPLink is a Link over a kernel UDP socket; only Linux has one.
type UDPLink struct{}

var (
	_ Link        = (*UDPLink)(nil)
	_ Poller      = (*UDPLink)(nil)
	_ Multicaster = (*UDPLink)(nil)
)

// ListenUDP returns an error: the UDP link needs Linux.
func ListenUDP(UDPConfig) (*UDPLink, error) { return nil, errNoUDP }

// ReadBatch returns ErrLinkClosed.
func (*UDPLink) ReadBatch([]Datagram) (int, error) { return 0, ErrLinkClosed }

// TryReadBatch returns ErrLinkClosed.
func (*UDPLink) TryReadBatch([]Datagram) (int, error) { return 0, ErrLinkClosed }

// WriteBatch returns ErrLinkClosed.
func (*UDPLink) WriteBatch([]Datagram) (int, error) { return 0, ErrLinkClosed }

// BatchSize returns 1.
func (*UDPLink) BatchSize() int { return 1 }

// LocalAddr returns the zero address.
func (*UDPLink) LocalAddr() netip.Addr { return netip.Addr{} }

// MTU returns 0: unknown.
func (*UDPLink) MTU() int { return 0 }

// InterfaceMTU returns an error: it needs Linux.
func InterfaceMTU(netip.Addr) (name string, mtu int, err error) { return "", 0, errNoUDP }

// Port returns 0.
func (*UDPLink) Port() uint16 { return 0 }

// Stats returns zero counters.
func (*UDPLink) Stats() UDPStats { return UDPStats{} }

// Close does nothing.
func (*UDPLink) Close() error { return nil }

// GSO reports false.
func (*UDPLink) GSO() bool { return false }

// GRO reports false.
func (*UDPLink) GRO() bool { return false }

// SrcPort returns 0.
func (*UDPLink) SrcPort() uint16 { return 0 }

// JoinGroup returns an error: the UDP link needs Linux.
func (*UDPLink) JoinGroup(netip.Addr) error { return errNoUDP }

// LeaveGroup returns an error: the UDP link needs Linux.
func (*UDPLink) LeaveGroup(netip.Addr) error { return errNoUDP }

// PollFD returns -1: there is no socket.
func (*UDPLink) PollFD() int { return -1 }
