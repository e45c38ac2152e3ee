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
//
// Above the transport it also reads and builds the payloads softnic must
// understand bit-exactly: the tag-matching headers (tm.go), the 256-byte
// management datagrams of QP1 ([ParseMAD], mad.go) and the connection
// manager's messages carried in them — REQ, MRA, REJ, REP, RTU, DREQ, DREP,
// SIDR_REQ, SIDR_REP, and the optional LAP and APR — with the RDMA CM's
// header and service IDs (cm.go, one field table per message in
// cm_layout.go after the kernel's ibta_vol1_c12.h). Their parse errors wrap [ErrBadMAD].
package wire
