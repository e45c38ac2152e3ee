// Package wire is softnic's RoCEv2 wire layer: zero-copy views over every
// InfiniBand transport header (BTH and its extension headers), the opcode
// table that drives them, 24-bit PSN arithmetic, the invariant CRC, and the
// IPv4/IPv6 + UDP encapsulation the ICRC covers (IBTA Annex A17).
//
// Header views are byte slices with named offsets (the gVisor header style):
// getters read in place, setters write in place, a Fields struct with Encode
// builds. Every view has a length check ([ErrTruncated]) before any read.
// One opcode table (opcode.go) says which headers a packet carries and where;
// [Parse] uses it once per packet and fills a [Packet] that handlers use
// without re-parsing. Nothing here allocates on the datapath.
package wire
