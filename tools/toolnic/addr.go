package toolnic

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// Default NIC addresses of the tools. Two NICs on one host cannot share
// an address (both would bind UDP port 4791 on it), so a server takes
// 127.0.0.1 and a client of a server on this host 127.0.0.2.
var (
	DefaultServerAddr = netip.MustParseAddr("127.0.0.1")
	DefaultClientAddr = netip.MustParseAddr("127.0.0.2")
)

// ClientAddr picks the NIC address of a client whose server is at host
// (a name or an address, as given on the command line): DefaultClientAddr
// when host is a loopback address, else the address this host sends from
// to reach host.
func ClientAddr(host string) (netip.Addr, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%s: %w", host, err)
	}
	if len(ips) == 0 {
		return netip.Addr{}, fmt.Errorf("%s: no address", host)
	}
	ip := ips[0].Unmap()
	for _, a := range ips {
		if a.Unmap().Is4() { // prefer IPv4, as the C tools' getaddrinfo order usually does
			ip = a.Unmap()
			break
		}
	}
	if ip.IsLoopback() {
		return DefaultClientAddr, nil
	}
	// A connected UDP socket learns the source address without sending.
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 4791)))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("no route to %s: %w", host, err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}
