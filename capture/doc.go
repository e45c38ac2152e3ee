// Package capture connects softnic's wire format to packet captures, for
// tools and tests only, never the datapath (STYLE.md §6):
//
//   - [RoCE], a gopacket layer for RoCEv2 registered on UDP port 4791, so
//     gopacket decodes Ethernet/IP/UDP/RoCE packets; it parses with
//     [wire.Parse] and exposes the BTH and each extension header as wire's
//     header views;
//   - [Writer], which writes RoCEv2 datagrams (a [wire.Encap] plus the UDP
//     payload) to a pcap file that tshark dissects as InfiniBand;
//   - [Reader], which yields every UDP datagram of a pcap or pcapng file of
//     any common Linux link type (Ethernet with 802.1Q tags, raw IP, Linux
//     cooked SLL and SLL2).
package capture
