// Package decode is the logic of "softnic decode": it reads pcap files,
// picks out the RoCEv2 packets (UDP destination port 4791), decodes each
// with package wire through the capture package's gopacket layer, checks
// its ICRC and prints one line (or one JSON object) per packet, then a
// summary. [Command] parses the command line and calls [Run].
//
// # JSON output
//
// With --json ([Options.JSON]) the output is JSON Lines: one [Record] per
// RoCEv2 packet, one object per line, then one [Summary]; nothing follows
// the summary, and errors about files go to standard error. Records carry
// the IP addresses as strings, the 32-bit header fields as numbers and
// the 64-bit ones (virtual addresses, atomic operands) as 0x strings (the
// conventions of package tooljson); an extension header the opcode does
// not carry is left out. A WRITE and the summary (wrapped here):
//
//	{"type":"packet","file":"samples.pcap","index":4,"time":"2026-03-04T05:06:07.003Z",
//	 "src":"10.77.0.3","dst":"10.77.0.2","src_port":49443,"dst_port":4791,
//	 "opcode":"RC_RDMA_WRITE_FIRST","opcode_value":6,"dest_qp":17,"psn":4,"ack_req":false,
//	 "se":false,"mig_req":false,"fecn":false,"becn":false,"pkey":65535,"pad":0,
//	 "reth":{"va":"0x000056310fb6b388","rkey":1714,"dma_len":5000},"payload_len":256,
//	 "icrc_ok":true,"icrc":2847622237,"icrc_want":2847622237}
//	{"type":"summary","files":1,"packets":28,"icrc_ok":28,"icrc_bad":0,"malformed":0,
//	 "other_skipped":0,"unreadable_files":0}
//
// A packet that does not parse has "error" in place of the header fields.
//
// # Management datagrams
//
// A UD SEND to or from QP 1 carries a MAD (the connection manager's REQ,
// REP, RTU, DREQ, DREP, REJ, MRA, SIDR_REQ/SIDR_REP, ...). Its text line
// has a group after the payload length: "CM[...]" with the attribute's
// name, the method, the transaction ID and the message's main fields (and
// "cma[...]" for the RDMA CM's addresses in a REQ or SIDR_REQ), or
// "MAD[...]" for other classes; a MAD that does not parse ends its group
// with error="..." and the packet still counts by its ICRC:
//
//	1 10.77.0.3:55410 > 10.77.0.2:4791 UD_SEND_ONLY qpn=0x1 psn=0x0 ackreq=1 DETH[qkey=0x80010000 srcqp=0x1]
//	 payload=256 CM[ConnectRequest method=Send tid=0x00000002b07ed2f3 lcid=0xf3d27eb0 sid=0x1061c06 qpn=0x1c
//	 psn=0x61ebe5 RC mtu=1024 resp_to=20/20 ack_to=19 retry=7 rnr_retry=7 max_cm_retries=15 rr=1 id=1
//	 pkey=0xffff sgid=::ffff:10.77.0.3 dgid=::ffff:10.77.0.2 flow=0x68f03 hop=64 tclass=0 sl=0
//	 cma[TCP v4 10.77.0.3:47459 > 10.77.0.2:7174]] icrc ok
//
// In JSON the packet has a "mad" object ([MAD]) with every field of the
// message.
package decode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"time"

	"github.com/gopacket/gopacket"

	"github.com/softnic/softnic/capture"
	"github.com/softnic/softnic/tools/tooljson"
	"github.com/softnic/softnic/wire"
)

// Options select the output form.
type Options struct {
	// JSON prints one JSON object per packet ([Record]) and a final
	// summary object ([Summary]) instead of text lines.
	JSON bool
}

// Summary counts what Run saw across all files. In JSON it is the last
// object of the output.
type Summary struct {
	// Type is always "summary" in JSON output.
	Type string `json:"type"`
	// Files is the number of files given, readable or not.
	Files int `json:"files"`
	// Packets counts RoCEv2 packets: UDP datagrams to port 4791, and frames
	// that break off before their UDP port can be read. Every one is
	// counted once in ICRCOK, ICRCBad or Malformed.
	Packets int `json:"packets"`
	// ICRCOK counts the packets whose ICRC is right.
	ICRCOK int `json:"icrc_ok"`
	// ICRCBad counts the packets that parsed with a wrong ICRC.
	ICRCBad int `json:"icrc_bad"`
	// Malformed counts RoCEv2 packets that do not parse (wire.Parse or the
	// IP/UDP headers fail), so have no ICRC verdict.
	Malformed int `json:"malformed"`
	// Skipped counts frames that are not RoCEv2: non-IP, non-UDP, UDP to
	// other ports.
	Skipped int `json:"other_skipped"`
	// UnreadableFiles counts files that could not be opened or read to the
	// end (their packets before the fault are counted).
	UnreadableFiles int `json:"unreadable_files"`
}

// OK reports whether every RoCEv2 packet parsed with a good ICRC and
// every file was read to its end.
func (s Summary) OK() bool { return s.ICRCBad == 0 && s.Malformed == 0 && s.UnreadableFiles == 0 }

// Line returns the text summary line: "N packets, N icrc ok, N icrc bad".
func (s Summary) Line() string {
	return fmt.Sprintf("%d packets, %d icrc ok, %d icrc bad", s.Packets, s.ICRCOK, s.ICRCBad)
}

// Record is one RoCEv2 packet in JSON output. A packet that does not
// parse has no header fields (Packet is nil) and says why in Error.
type Record struct {
	// Type is always "packet".
	Type string `json:"type"`
	// File is the capture file's name as given on the command line.
	File string `json:"file"`
	// Index is the 1-based frame number in the file, as Wireshark counts.
	Index int `json:"index"`
	// Time is the capture time stamp (RFC 3339, nanoseconds).
	Time time.Time `json:"time"`
	// Src and Dst are the IP addresses (IPv4 dotted, IPv6 text); left out
	// when the frame broke off before them.
	Src netip.Addr `json:"src,omitzero"`
	Dst netip.Addr `json:"dst,omitzero"`
	// SrcPort and DstPort are the UDP ports; left out when the frame broke
	// off before them.
	SrcPort uint16 `json:"src_port,omitempty"`
	DstPort uint16 `json:"dst_port,omitempty"`
	*Packet
	// Error says why the packet did not parse; left out when it did.
	Error string `json:"error,omitempty"`
}

// Packet holds the decoded fields of a RoCEv2 packet that parsed; in JSON
// they sit in the Record's object. Extension headers the opcode does not
// carry are nil, and left out.
type Packet struct {
	// Opcode is the BTH opcode's name ("RC_SEND_ONLY"), OpcodeValue its
	// number.
	Opcode      string `json:"opcode"`
	OpcodeValue uint8  `json:"opcode_value"`
	// DestQP is the destination QP number (24 bits).
	DestQP uint32 `json:"dest_qp"`
	// PSN is the packet sequence number (24 bits).
	PSN uint32 `json:"psn"`
	// AckReq, SE, MigReq, FECN and BECN are the BTH's A, SE and M bits and
	// its FECN and BECN bits.
	AckReq bool `json:"ack_req"`
	SE     bool `json:"se"`
	MigReq bool `json:"mig_req"`
	FECN   bool `json:"fecn"`
	BECN   bool `json:"becn"`
	// PKey is the partition key.
	PKey uint16 `json:"pkey"`
	// Pad is the pad count: bytes added to the payload to a multiple of 4.
	Pad          int           `json:"pad"`
	RDETH        *RDETH        `json:"rdeth,omitempty"`
	DETH         *DETH         `json:"deth,omitempty"`
	XRCETH       *XRCETH       `json:"xrceth,omitempty"`
	FETH         *FETH         `json:"feth,omitempty"`
	RETH         *RETH         `json:"reth,omitempty"`
	AtomicETH    *AtomicETH    `json:"atomic_eth,omitempty"`
	AETH         *AETH         `json:"aeth,omitempty"`
	AtomicAckETH *AtomicAckETH `json:"atomic_ack_eth,omitempty"`
	// ImmDt is the immediate data (IBTA 9.3.8), a 32-bit number.
	ImmDt *uint32 `json:"imm_dt,omitempty"`
	IETH  *IETH   `json:"ieth,omitempty"`
	// MAD is the management datagram a UD SEND to or from QP 1 carries
	// (see [MAD]); left out for every other packet.
	MAD *MAD `json:"mad,omitempty"`
	// PayloadLen is the payload's length in bytes, pad excluded.
	PayloadLen int `json:"payload_len"`
	// ICRCOK is the verdict; ICRC is the value the packet carries and
	// ICRCWant the value computed over it (IBTA A17.3.3).
	ICRCOK   bool   `json:"icrc_ok"`
	ICRC     uint32 `json:"icrc"`
	ICRCWant uint32 `json:"icrc_want"`
}

// RDETH is the reliable datagram header (IBTA 9.3.1).
type RDETH struct {
	// EEContext is the end-to-end context (24 bits).
	EEContext uint32 `json:"ee_context"`
}

// DETH is the datagram header (IBTA 9.3.2).
type DETH struct {
	// QKey is the queue key.
	QKey uint32 `json:"qkey"`
	// SrcQP is the sending QP's number (24 bits).
	SrcQP uint32 `json:"src_qp"`
}

// XRCETH is the XRC header (IBTA 9.3.7).
type XRCETH struct {
	// XRCSRQ is the target XRC SRQ number (24 bits).
	XRCSRQ uint32 `json:"xrc_srq"`
}

// FETH is the FLUSH header (IBA A19.4.4).
type FETH struct {
	// PlacementType and Selectivity are the FLUSH's fields.
	PlacementType uint8 `json:"placement_type"`
	Selectivity   uint8 `json:"selectivity"`
}

// RETH is the RDMA header (IBTA 9.3.3).
type RETH struct {
	// VA is the remote virtual address, a 0x string (tooljson.Hex64).
	VA tooljson.Hex64 `json:"va"`
	// RKey is the remote key.
	RKey uint32 `json:"rkey"`
	// DMALen is the length of the whole transfer in bytes.
	DMALen uint32 `json:"dma_len"`
}

// AtomicETH is the atomic request header (IBTA 9.3.4).
type AtomicETH struct {
	// VA is the remote virtual address, a 0x string.
	VA tooljson.Hex64 `json:"va"`
	// RKey is the remote key.
	RKey uint32 `json:"rkey"`
	// SwapAdd is the swap value of COMPARE_SWAP and the addend of
	// FETCH_ADD, a 0x string.
	SwapAdd tooljson.Hex64 `json:"swap_add"`
	// Compare is COMPARE_SWAP's compare value, a 0x string.
	Compare tooljson.Hex64 `json:"compare"`
}

// AETH is the ACK header (IBTA 9.3.5).
type AETH struct {
	// Syndrome is the named form ("ACK(credits=31)", "NAK_PSN_SEQ_ERR",
	// "RNR_NAK(timer=14)"), SyndromeValue the byte.
	Syndrome      string `json:"syndrome"`
	SyndromeValue uint8  `json:"syndrome_value"`
	// MSN is the message sequence number (24 bits).
	MSN uint32 `json:"msn"`
}

// AtomicAckETH is the atomic ACK header (IBTA 9.3.6).
type AtomicAckETH struct {
	// Orig is the original value at the target address, a 0x string.
	Orig tooljson.Hex64 `json:"orig"`
}

// IETH is the invalidate header (IBTA 9.3.9).
type IETH struct {
	// RKey is the remote key to invalidate.
	RKey uint32 `json:"rkey"`
}

// Decoder decodes captures one after another into one output and keeps a
// running Summary. Run is the usual entry point.
type Decoder struct {
	w    *errWriter
	opts Options
	sum  Summary
	enc  *json.Encoder
	roce capture.RoCE
}

// NewDecoder returns a Decoder writing to w.
func NewDecoder(w io.Writer, opts Options) *Decoder {
	ew := &errWriter{w: w}
	d := &Decoder{w: ew, opts: opts, sum: Summary{Type: "summary"}}
	if opts.JSON {
		d.enc = json.NewEncoder(ew)
	}
	return d
}

// Run decodes each file in turn, writing to w, and ends with the summary:
// in text, a line "N malformed, N other skipped, N unreadable files" and
// then exactly the line "N packets, N icrc ok, N icrc bad"; in JSON, a
// summary object. A file that cannot be read is reported in the returned
// error (all such errors joined) and counted, and Run goes on with the
// next. The caller should fail when the error is non-nil or !Summary.OK().
func Run(w io.Writer, files []string, opts Options) (Summary, error) {
	d := NewDecoder(w, opts)
	var errs []error
	for _, name := range files {
		if err := d.DecodeFile(name); err != nil {
			errs = append(errs, err)
		}
	}
	sum, err := d.Finish()
	if err != nil {
		errs = append(errs, err)
	}
	return sum, errors.Join(errs...)
}

// DecodeFile decodes the capture file name.
func (d *Decoder) DecodeFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		d.sum.Files++
		d.sum.UnreadableFiles++
		return err
	}
	defer f.Close()
	return d.Decode(name, f)
}

// Decode decodes a capture read from r, naming it name in the output.
func (d *Decoder) Decode(name string, r io.Reader) error {
	d.sum.Files++
	cr, err := capture.NewReader(r)
	if err != nil {
		d.sum.UnreadableFiles++
		return fmt.Errorf("%s: %w", name, err)
	}
	if !d.opts.JSON {
		d.printf("== %s\n", name)
	}
	defer func() { d.sum.Skipped += cr.Skipped() }()
	for {
		dg, err := cr.Next()
		if err == io.EOF {
			return d.w.err
		}
		var fe *capture.FrameError
		if errors.As(err, &fe) {
			if fe.DstPort != 0 && fe.DstPort != wire.UDPPort {
				d.sum.Skipped++
				continue
			}
			d.malformed(Record{File: name, Index: fe.Index, Time: fe.Time}, "", fe.Err)
			continue
		}
		if err != nil {
			d.sum.UnreadableFiles++
			return fmt.Errorf("%s: %w", name, err)
		}
		if dg.Encap.DstPort != wire.UDPPort {
			d.sum.Skipped++
			continue
		}
		d.packet(name, &dg)
		if d.w.err != nil {
			return d.w.err
		}
	}
}

// Finish writes the summary and returns it, with the first error met
// writing the output.
func (d *Decoder) Finish() (Summary, error) {
	s := d.sum
	if d.opts.JSON {
		d.enc.Encode(s)
	} else {
		d.printf("%d malformed, %d other skipped, %d unreadable files\n", s.Malformed, s.Skipped, s.UnreadableFiles)
		d.printf("%s\n", s.Line())
	}
	return s, d.w.err
}

// packet decodes and prints one RoCEv2 datagram.
func (d *Decoder) packet(file string, dg *capture.Datagram) {
	addrs := fmt.Sprintf("%s > %s",
		netip.AddrPortFrom(dg.Encap.Src, dg.Encap.SrcPort), netip.AddrPortFrom(dg.Encap.Dst, dg.Encap.DstPort))
	rec := Record{
		File: file, Index: dg.Index, Time: dg.Time,
		Src: dg.Encap.Src, Dst: dg.Encap.Dst,
		SrcPort: dg.Encap.SrcPort, DstPort: dg.Encap.DstPort,
	}
	r := &d.roce
	if err := r.DecodeFromBytes(dg.Payload, gopacket.NilDecodeFeedback); err != nil {
		d.malformed(rec, addrs, err)
		return
	}
	rec.Packet = newPacket(r)
	rec.ICRC = wire.StoredICRC(dg.Payload)
	rec.ICRCWant = wire.ComputeICRC(&dg.Encap, dg.Payload)
	rec.ICRCOK = rec.ICRC == rec.ICRCWant
	d.sum.Packets++
	verdict := "icrc ok"
	if rec.ICRCOK {
		d.sum.ICRCOK++
	} else {
		d.sum.ICRCBad++
		verdict = fmt.Sprintf("icrc BAD (got 0x%08x want 0x%08x)", rec.ICRC, rec.ICRCWant)
	}
	if d.opts.JSON {
		rec.Type = "packet"
		d.enc.Encode(&rec)
		return
	}
	mad := ""
	if rec.MAD != nil {
		mad = " " + rec.MAD.String()
	}
	d.printf("%d %s %s%s %s\n", dg.Index, addrs, r.String(), mad, verdict)
}

// malformed counts and prints a RoCEv2 packet that does not parse; addrs
// is its "src > dst" when known.
func (d *Decoder) malformed(rec Record, addrs string, err error) {
	d.sum.Packets++
	d.sum.Malformed++
	if d.opts.JSON {
		rec.Type = "packet"
		rec.Error = err.Error()
		d.enc.Encode(&rec)
		return
	}
	where := ""
	if addrs != "" {
		where = " (" + addrs + ")"
	}
	d.printf("error: %s packet %d%s: %v\n", rec.File, rec.Index, where, err)
}

func (d *Decoder) printf(format string, args ...any) { fmt.Fprintf(d.w, format, args...) }

// newPacket converts a decoded layer into its JSON form.
func newPacket(r *capture.RoCE) *Packet {
	b := r.BTH
	p := &Packet{
		Opcode: r.Opcode.String(), OpcodeValue: uint8(r.Opcode),
		DestQP: b.DestQP(), PSN: uint32(b.PSN()), AckReq: b.AckReq(), SE: b.SE(),
		MigReq: b.MigReq(), FECN: b.FECN(), BECN: b.BECN(), PKey: b.PKey(), Pad: r.Pad,
		PayloadLen: len(r.LayerPayload()),
	}
	if h := r.RDETH; h != nil {
		p.RDETH = &RDETH{EEContext: h.EECnxt()}
	}
	if h := r.DETH; h != nil {
		p.DETH = &DETH{QKey: h.QKey(), SrcQP: h.SrcQP()}
	}
	if h := r.XRCETH; h != nil {
		p.XRCETH = &XRCETH{XRCSRQ: h.XRCSRQ()}
	}
	if h := r.FETH; h != nil {
		p.FETH = &FETH{PlacementType: h.PlacementType(), Selectivity: h.Selectivity()}
	}
	if h := r.RETH; h != nil {
		p.RETH = &RETH{VA: tooljson.Hex64(h.VA()), RKey: h.RKey(), DMALen: h.DMALen()}
	}
	if h := r.AtomicETH; h != nil {
		p.AtomicETH = &AtomicETH{VA: tooljson.Hex64(h.VA()), RKey: h.RKey(), SwapAdd: tooljson.Hex64(h.SwapAdd()),
			Compare: tooljson.Hex64(h.Compare())}
	}
	if h := r.AETH; h != nil {
		p.AETH = &AETH{Syndrome: h.Syndrome().String(), SyndromeValue: uint8(h.Syndrome()), MSN: h.MSN()}
	}
	if h := r.AtomicAckETH; h != nil {
		p.AtomicAckETH = &AtomicAckETH{Orig: tooljson.Hex64(h.Orig())}
	}
	if h := r.ImmDt; h != nil {
		v := h.Imm()
		p.ImmDt = &v
	}
	if h := r.IETH; h != nil {
		p.IETH = &IETH{RKey: h.RKey()}
	}
	if isGSI(p.DestQP, r.DETH, r.LayerPayload()) {
		p.MAD = newMAD(r.LayerPayload())
	}
	return p
}

// errWriter remembers the first write error, so printing code can ignore
// errors and the caller sees one at the end.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
