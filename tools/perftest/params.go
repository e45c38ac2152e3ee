// Package perftest is the logic of softnic's write_bw, write_lat, read_bw,
// read_lat, send_bw, send_lat, atomic_bw and atomic_lat: softnic's
// versions of linux-rdma/perftest's ib_* tools (perftest 4.5, the one
// Debian 12 ships), which pair with the C tool of the same name in either
// role. They take the same options, exchange the same out-of-band messages
// over TCP in the same order (version, page and cache-line sizes, MTU,
// the LID:OUT:QPN:PSN:RKEY:VADDR:GID:SRQN key messages, bandwidth reports,
// "done"), connect their QPs with the same attributes, run the same
// loops (CQ moderation, cycling buffer addresses, memory polling in
// write_lat) and print the same header, address lines and result table.
//
// Time is measured with the monotonic clock in nanoseconds where perftest
// counts CPU cycles, so "cycles" (-C) are nanoseconds.
//
// # JSON output
//
// With --json (softnic's own option; [Env.JSON]) a tool prints one
// [Result] on standard output instead of the text, and nothing else there:
// perftest's warnings and the server's "Waiting for client" banner go to
// standard error. Bandwidths are MB/sec (2^20 bytes per second) and
// latencies microseconds whatever --report_gbits and -C say; GIDs are
// strings as ibv_devinfo prints them, virtual addresses 0x strings (the
// conventions of package tooljson). A write_bw client:
//
//	{
//	  "tool": "write_bw",
//	  "side": "client",
//	  "device": "softnic0",
//	  "connection": "RC",
//	  "peer_version": "6.06",
//	  "local": [
//	    {
//	      "lid": 0,
//	      "qpn": 17,
//	      "psn": 3741487,
//	      "rkey": 336,
//	      "vaddr": "0x000004e34e258000",
//	      "out_reads": 1,
//	      "gid": "::ffff:127.0.0.2"
//	    }
//	  ],
//	  "remote": [
//	    {
//	      "lid": 0,
//	      "qpn": 17,
//	      "psn": 4373806,
//	      "rkey": 321,
//	      "vaddr": "0x00003b50fa094000",
//	      "out_reads": 1,
//	      "gid": "::ffff:127.0.0.1"
//	    }
//	  ],
//	  "mtu": 4096,
//	  "bw": [
//	    {
//	      "size": 65536,
//	      "iterations": 5,
//	      "bw_peak": 190.06723818618073,
//	      "bw_average": 190.06689138148522,
//	      "msg_rate_mpps": 0.003041070262103764
//	    }
//	  ],
//	  "checked": false
//	}
//
// A latency test has "latency" ([LatResult]: t_min_usec, t_max_usec,
// t_typical_usec, t_avg_usec, t_stdev_usec, p99_usec, p99_9_usec, with -H
// samples_usec (every kept latency, sorted), and
// tps_average in duration runs) where a bandwidth test has "bw".
//
// A peer that dies mid-run: RC QPs have perftest's timeout (-u, 14) and
// retry_cnt 7, which softnic takes as seven retries, so work in flight
// fails within 8 local ACK timeouts and the run ends with "peer stopped
// answering: transport retry counter exceeded after 7 retries" (or "peer
// not ready: RNR retry counter exceeded after 7 retries") after perftest's
// own completion-error lines. When the out-of-band connection breaks
// first (a -D run's closing handshake), the tool waits up to that bound
// for the transport's verdict before it reports the EOF. write_lat and
// send_lat, whose waiting side has nothing in flight, probe a silent peer
// with zero-length WRITEs after one local ACK timeout (see prober), so
// theirs comes within retry_cnt+2 timeouts. The passive sides of the
// bandwidth tests send nothing: they learn of a dead client from the
// out-of-band EOF, or in send_bw's receive loop from the stall timeout.
package perftest

import (
	"errors"
	"fmt"
	"time"
)

// Verb is the operation tested (perftest's VerbType).
type Verb int

const (
	Send Verb = iota
	Write
	Read
	Atomic
)

var verbNames = [...]string{"Send", "RDMA_Write", "RDMA_Read", "Atomic"}

// String returns perftest's name of the verb (testsStr).
func (v Verb) String() string { return verbNames[v] }

// TestKind is bandwidth or latency (perftest's TestType "tst").
type TestKind int

const (
	BW TestKind = iota
	Lat
)

// Conn is the QP transport (perftest's connection_type).
type Conn int

const (
	RC Conn = iota
	UC
	UD
)

var connNames = [...]string{"RC", "UC", "UD"}

func (c Conn) String() string { return connNames[c] }

// ParseConn reads -c's argument as change_conn_type does.
func ParseConn(s string, v Verb) (Conn, error) {
	switch s {
	case "RC":
		return RC, nil
	case "UC":
		if v == Read || v == Atomic {
			return 0, fmt.Errorf("UC connection not possible in READ/ATOMIC verbs")
		}
		return UC, nil
	case "UD":
		if v != Send {
			return 0, fmt.Errorf("UD connection only possible in SEND verb")
		}
		return UD, nil
	case "RawEth", "XRC", "DC", "SRD":
		return 0, fmt.Errorf("%s connection is not supported by softnic", s)
	}
	return 0, fmt.Errorf("invalid connection type %q (RC, UC or UD)", s)
}

// AtomicType is the atomic operation of the atomic tests.
type AtomicType int

const (
	CmpAndSwap AtomicType = iota
	FetchAndAdd
)

var atomicNames = [...]string{"CMP_AND_SWAP", "FETCH_AND_ADD"}

func (a AtomicType) String() string { return atomicNames[a] }

// ParseAtomic reads -A's argument (CMP_AND_SWAP or FETCH_AND_ADD; also
// the verbs names CMP_AND_SWP and FETCH_AND_ADD).
func ParseAtomic(s string) (AtomicType, error) {
	switch s {
	case "CMP_AND_SWAP", "CMP_AND_SWP":
		return CmpAndSwap, nil
	case "FETCH_AND_ADD":
		return FetchAndAdd, nil
	}
	return 0, fmt.Errorf("Invalid Atomic type! please choose from {CMP_AND_SWAP,FETCH_AND_ADD}")
}

// Output selects perftest's --output: the full report or one number.
type Output int

const (
	OutputFull    Output = iota // FULL_VERBOSITY
	OutputBW                    // --output=bandwidth
	OutputMsgRate               // --output=message_rate
	OutputLat                   // --output=latency
)

// Defaults and limits (perftest_parameters.h).
const (
	DefPort        = 18515
	DefSizeBW      = 65536
	DefSizeLat     = 2
	DefIters       = 1000
	DefItersWB     = 5000
	DefTxBW        = 128
	DefTxLat       = 1
	DefQPTimeout   = 14
	DefRxRDMA      = 1
	DefRxSend      = 512
	DefCQMod       = 100
	DefSizeAtomic  = 8
	DefQKey        = 0x11111111
	DefDuration    = 5
	MaxSize        = 8388608
	UDAddition     = 40
	UCMaxRx        = 16000
	MinIter        = 5
	MaxIter        = 100000000
	MaxTx          = 15000
	MaxRx          = 16384
	MaxCQMod       = 1024
	MaxQPNum       = 16384
	MaxInline      = 912
	msgSizeCQLimit = 8192
	minRNRTimer    = 12
	atomicAdd      = 1 // ATOMIC_ADD_VALUE
	atomicSwap     = 0 // ATOMIC_SWAP_VALUE
)

// Config holds a run's options, one field per perftest option softnic
// supports.
type Config struct {
	Verb Verb
	Test TestKind

	ServerName string // client mode: the server's host
	Port       int    // -p: TCP port of the out-of-band exchange
	IBDev      string // -d: the device name printed ("Device : ...")
	IBPort     int    // -i
	MTU        int    // -m in bytes; 0: the port's active MTU
	Size       uint64 // -s
	SizeSet    bool   // -s was given (req_size)
	Iters      int    // -n
	TxDepth    int    // -t
	RxDepth    int    // -r
	QPTimeout  uint8  // -u
	SL         int    // -S
	GIDIndex   int    // -x; -1: automatic (0 on Ethernet)
	All        bool   // -a: sizes 2 .. 2^23
	Conn       Conn   // -c
	NumQP      int    // -q
	Events     bool   // -e
	Inline     int    // -I; -1: the default
	OutReads   int    // -o; 0: the device maximum
	CQMod      int    // -Q
	CQModSet   bool
	NoPeak     bool          // -N
	Atomic     AtomicType    // -A
	Duration   time.Duration // -D; 0: iterations
	Margin     time.Duration // -f; -1: Duration/4
	Cycles     bool          // -C: report latency in cycles (nanoseconds)
	Histogram  bool          // -H
	Unsorted   bool          // -U
	ReportGbit bool          // --report_gbits
	Output     Output        // --output
	TClass     uint8         // --tclass
	NoXchgVer  bool          // --dont_xchg_versions
	IPv6       bool          // --ipv6: the out-of-band socket uses IPv6
	SourceIP   string        // --source_ip: bind the client's socket to it
	// RDMACM (-R, --rdma_cm) connects the QPs through the RDMA connection
	// manager (rdma_cm QPs: ON) and carries the out-of-band exchange on
	// an rdma_cm connection too, as perftest's work_rdma_cm does; the
	// run's Env needs a CM then.
	RDMACM bool
	// CommRDMACM (-z, --comm_rdma_cm) carries the out-of-band exchange on
	// an rdma_cm connection (Data ex. method: rdma_cm) and connects the
	// QPs from the exchanged keys as without it.
	CommRDMACM bool

	// Check (softnic's --check) fills the buffers with patterns derived
	// from the key messages and checks what arrived after the run; both
	// sides must be softnic with --check.
	Check bool
}

// Defaults returns perftest's defaults for verb v and test t.
func Defaults(v Verb, t TestKind) Config {
	c := Config{Verb: v, Test: t, Port: DefPort, IBPort: 1, GIDIndex: -1, NumQP: 1,
		Inline: -1, CQMod: DefCQMod, QPTimeout: DefQPTimeout, Margin: -1, Iters: DefIters}
	c.Size = DefSizeLat
	c.TxDepth = DefTxLat
	if t == BW {
		c.Size, c.TxDepth = DefSizeBW, DefTxBW
		if v == Write {
			c.Iters = DefItersWB
		}
	}
	c.RxDepth = DefRxRDMA
	if v == Send {
		c.RxDepth = DefRxSend
	}
	if v == Atomic {
		c.Atomic, c.Size = FetchAndAdd, DefSizeAtomic
	}
	return c
}

// Tool returns the tool's name, e.g. "write_bw".
func (c *Config) Tool() string {
	n := [...]string{"send", "write", "read", "atomic"}[c.Verb]
	if c.Test == BW {
		return n + "_bw"
	}
	return n + "_lat"
}

// Server reports whether this side is the server.
func (c *Config) Server() bool { return c.ServerName == "" }

// Message is a message perftest prints while it adjusts its parameters:
// Stdout lines go to standard output (to standard error with --json, which
// keeps standard output for the JSON), the others to standard error.
type Message struct {
	Stdout bool
	Text   string
}

// maxPeakIters is the most iterations of a run whose peak perftest
// measures unless told not to (-N).
const maxPeakIters = 20000

// resolve applies force_dependecies: the adjustments and refusals
// perftest makes once the options are parsed. It returns the messages
// perftest prints on the way.
func (c *Config) resolve() ([]Message, error) {
	var msgs []Message
	if c.RDMACM {
		// force_dependecies: work_rdma_cm implies use_rdma_cm.
		switch c.Conn {
		case UC:
			return []Message{{true, resultLine}, {true, " UC is not supported in librdmacm\n"}},
				errors.New("UC is not supported in librdmacm")
		}
		c.CommRDMACM = true
	}
	if c.Test == Lat && c.NumQP > 1 {
		return nil, fmt.Errorf(" Multiple QPs only available on bw tests")
	}
	if c.Duration > 0 {
		if c.Margin < 0 {
			c.Margin = time.Duration(int(c.Duration/time.Second)/4) * time.Second
		}
		if 2*c.Margin >= c.Duration {
			return nil, fmt.Errorf(" Margin of %v leaves no sample time in a %v run", c.Margin, c.Duration)
		}
	} else {
		if c.TxDepth > c.Iters {
			c.TxDepth = c.Iters
		}
		if c.Verb == Send && c.RxDepth > c.Iters {
			c.RxDepth = c.Iters
		}
		if (c.Conn == UD || c.Conn == UC) && c.RxDepth == DefRxSend {
			c.RxDepth = min(c.Iters, UCMaxRx)
		}
	}
	if c.Size > msgSizeCQLimit && c.Conn != UD && !c.All && !c.Events {
		if !c.CQModSet {
			c.CQMod = 1
		} else if c.CQMod > 1 {
			msgs = append(msgs, Message{true, resultLine}, Message{true, "Warning: Large message requested and CQ moderation enabled\n"},
				Message{true, "Warning: It can lead to inaccurate results\n"})
		}
	}
	if c.CQMod > c.TxDepth {
		c.CQMod = c.TxDepth
	}
	if c.Verb == Read || c.Verb == Atomic {
		c.Inline = 0
	}
	if c.All {
		c.Size = MaxSize
	}
	if c.Verb == Atomic && c.Size != DefSizeAtomic {
		return msgs, fmt.Errorf("Message size cannot be changed for Atomic tests ")
	}
	if c.Duration > 0 {
		c.NoPeak = true
		if c.Events {
			return msgs, fmt.Errorf("Duration mode doesn't work with events.")
		}
		if c.All {
			return msgs, fmt.Errorf("Duration mode currently doesn't support running on all sizes.")
		}
	}
	if c.Verb == Send && c.Test == BW && c.Server() {
		c.NoPeak = true
	}
	// The peak is the best of every run of moderated completions: its
	// cost grows with the square of the iterations (ComputeBW; 47 s of
	// CPU at 2 M), and perftest measures it only up to 20000 iterations
	// (the version of Debian's, 6.06, says nothing; later ones print a
	// warning).
	if c.Test == BW && c.Duration == 0 && c.Iters > maxPeakIters {
		c.NoPeak = true
	}
	if c.Check && c.Test == Lat && (c.Verb == Write || c.Verb == Send) {
		return msgs, fmt.Errorf("--check is for write_bw, read_bw, send_bw, atomic_bw, read_lat and atomic_lat")
	}
	if c.GIDIndex == -1 {
		c.GIDIndex = 0 // an Ethernet link always uses a GID (check_link)
	}
	return msgs, nil
}
