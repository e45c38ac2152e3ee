package toolnic

import (
	"io"
	"math/rand/v2"
	"net"
	"os"
	"time"

	"github.com/softnic/softnic/tools/oob"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// Env is a tool's environment: what every softnic tool takes from
// outside besides its own options. cmd/softnic makes one for each command
// with the standard streams and the link; the command line sets the NIC
// options (NIC, Stall, AcceptTimeout, ConnectRetry); opening the NIC sets
// Dev, and CM for the tools that connect through the connection manager;
// the tool's run reads the rest. Tests make one around a device on the
// in-memory fabric.
type Env struct {
	Out io.Writer // standard output; nil discards
	Err io.Writer // standard error: warnings, perror's lines; nil discards

	// NIC says where and how the NIC is opened (--addr, --port-udp,
	// --pcap, --metrics, --busy-poll; the link: UDP, or the fabric in
	// tests).
	NIC Config
	// Dev is the NIC the tool runs on.
	Dev *verbs.Device
	// CM is the connection manager on Dev: the librdmacm tools', and
	// perftest's with -R or -z.
	CM *cm.CM

	// Stall bounds each wait on the peer once connected (--timeout; 0:
	// DefaultStall).
	Stall time.Duration
	// AcceptTimeout bounds a server's wait for its client
	// (--accept-timeout; 0: no bound).
	AcceptTimeout time.Duration
	// ConnectRetry is how long a client keeps trying a server that
	// refuses the connection (--connect-timeout; 0: one try, as the C
	// tools).
	ConnectRetry time.Duration

	// Listener, for a server of an out-of-band exchange (the pingpongs,
	// perftest), is the socket to accept the client on; nil means listen
	// on the tool's port.
	Listener net.Listener
	// Dial connects a client of an out-of-band exchange to its server;
	// nil means a net.Dialer.
	Dial oob.DialFunc
	// PSN returns a starting PSN; nil means a random one, as the C
	// tools' lrand48() & 0xffffff.
	PSN func() uint32
	// PageSize is this host's page size, which the pingpongs' -c and
	// perftest count in; 0 means the system's.
	PageSize int
}

// WithDefaults returns e with what is unset set to its default: output
// that goes nowhere, DefaultStall, random PSNs, the system's page size.
func (e Env) WithDefaults() Env {
	if e.Out == nil {
		e.Out = io.Discard
	}
	if e.Err == nil {
		e.Err = io.Discard
	}
	if e.Stall <= 0 {
		e.Stall = DefaultStall
	}
	if e.PSN == nil {
		e.PSN = func() uint32 { return rand.Uint32() & 0xffffff }
	}
	if e.PageSize <= 0 {
		e.PageSize = os.Getpagesize()
	}
	return e
}
