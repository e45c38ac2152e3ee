package perftest

import (
	"github.com/softnic/softnic/tools/tooljson"
	"github.com/softnic/softnic/verbs"
)

// Result is what a run did, and the document --json prints: one JSON
// object, indented, on standard output, and nothing else there (the
// warnings and the "Waiting for client" banner perftest prints on
// standard output go to standard error with --json; the header, address
// lines and table are left out). It is printed when the run succeeded,
// and when --check found bad data (then with check_error); a run that
// failed otherwise prints nothing on standard output. The package
// documentation shows an example; package tooljson has the conventions.
type Result struct {
	// Tool is the test run: "write_bw", "read_lat", ...
	Tool string `json:"tool"`
	// Side is "server" or "client".
	Side string `json:"side"`
	// Device is the NIC's name (-d; softnic0 by default).
	Device string `json:"device"`
	// Connection is the QP transport: "RC", "UC" or "UD" (-c).
	Connection string `json:"connection"`
	// Peer is the version string the peer sent ("6.06" for softnic and
	// perftest 4.5); left out with --dont_xchg_versions.
	Peer string `json:"peer_version,omitempty"`
	// Local are this side's QPs, one per -q, as it sent them to the peer.
	Local []QP `json:"local"`
	// Remote are the peer's QPs as it sent them (in the Result Run
	// returns after a failure, empty or zero-valued where the exchange
	// did not get to).
	Remote []QP `json:"remote"`
	// MTU is the path MTU the QPs used, in bytes.
	MTU int `json:"mtu"`
	// BW are the bandwidth tests' result lines, one per message size (-a
	// gives several). A send_bw server has its own; the server of the
	// other bandwidth tests reports the client's.
	BW []BWResult `json:"bw,omitempty"`
	// Lat are the latency tests' result lines, one per message size. The
	// servers of read_lat and atomic_lat measure nothing and have none.
	Lat []LatResult `json:"latency,omitempty"`
	// Checked is set when --check verified data on this side.
	Checked bool `json:"checked"`
	// CheckErr says what --check found wrong; empty when nothing.
	CheckErr string `json:"check_error,omitempty"`
}

// QP is one QP's address in a Result: the fields of perftest's key
// message (Dest), with the GID as a string.
type QP struct {
	// LID is the port's LID: 0 on RoCE.
	LID uint16 `json:"lid"`
	// QPN is the QP number.
	QPN uint32 `json:"qpn"`
	// PSN is the QP's first packet sequence number (24 bits).
	PSN uint32 `json:"psn"`
	// RKey is the remote key of the QP's buffer, which the peer's READs,
	// WRITEs and atomics target.
	RKey uint32 `json:"rkey"`
	// VAddr is the virtual address of that buffer.
	VAddr tooljson.Hex64 `json:"vaddr"`
	// OutReads is the number of outstanding READs and atomics the side
	// allows (-o); 1 for the tests that issue none.
	OutReads uint32 `json:"out_reads"`
	// GID is the port's GID, as ibv_devinfo prints a RoCE v2 GID
	// ("::ffff:127.0.0.2"), where perftest's address lines print its
	// bytes in decimal.
	GID verbs.GID `json:"gid"`
}

// qpsOf converts key messages to their JSON form.
func qpsOf(ds []Dest) []QP {
	qs := make([]QP, len(ds))
	for i, d := range ds {
		qs[i] = QP{LID: d.LID, QPN: d.QPN, PSN: d.PSN, RKey: d.RKey, VAddr: tooljson.Hex64(d.VAddr), OutReads: d.OutReads, GID: d.GID}
	}
	return qs
}

// inMBps returns r with its bandwidths in MB/sec (2^20 bytes per second),
// the unit of Result whatever --report_gbits says.
func (r BWResult) inMBps() BWResult {
	if r.Gbits {
		const f = 125000000.0 / 0x100000 // bytes per Gbit / bytes per MB
		r.BWPeak *= f
		r.BWAvg *= f
		r.Gbits = false
	}
	return r
}

// inUsec returns r with its times in microseconds, the unit of Result
// whatever -C says (-C reports nanoseconds, softnic's "cycles").
func (r LatResult) inUsec(c *Config) LatResult {
	if c.Cycles && !r.Duration {
		for _, v := range []*float64{&r.Min, &r.Max, &r.Typical, &r.Avg, &r.Stdev, &r.P99, &r.P999} {
			*v /= 1000
		}
		if r.Samples != nil {
			us := make([]float64, len(r.Samples)) // r shares the caller's
			for i, v := range r.Samples {
				us[i] = v / 1000
			}
			r.Samples = us
		}
	}
	return r
}
