package perftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/softnic/softnic/tools/oob"
)

// comm is the out-of-band connection (struct perftest_comm over an
// Ethernet socket). In every exchange the client writes first and the
// server reads first (ctx_xchg_data_ethernet, ctx_hand_shake).
type comm struct {
	c      *oob.Conn
	ctx    context.Context
	client bool
	// alive, when set, counts what the NIC receives: a read that waits
	// past stall goes on waiting while it moves (see read).
	alive       func() uint64
	withGID     bool
	peerVersion float64
	// rdmaKeys: the key messages are struct pingpong_dest (the exchange
	// runs on an rdma_cm connection), with gidIndex in it.
	rdmaKeys bool
	gidIndex int
}

func newComm(ctx context.Context, c net.Conn, client bool, stall time.Duration, alive func() uint64) *comm {
	return &comm{c: oob.NewConn(ctx, c, stall), ctx: ctx, client: client, alive: alive, withGID: true}
}

func (m *comm) close() { m.c.Close() }

// CommError is a failure of the out-of-band exchange.
type CommError struct {
	Step string // what was being exchanged
	Err  error
}

func (e *CommError) Error() string {
	return fmt.Sprintf("out-of-band exchange (%s): %v", e.Step, e.Err)
}

func (e *CommError) Unwrap() error { return e.Err }

func (m *comm) ioErr(step string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = errors.New("the peer closed the connection (is it the perftest tool of the same name, run with the same options?)")
	}
	return &CommError{Step: step, Err: m.c.Timeout(err)}
}

func (m *comm) write(step string, b []byte) error {
	if _, err := m.c.Write(b); err != nil {
		return m.ioErr(step, err)
	}
	return nil
}

// read reads the peer's n-byte message. It fails when the peer sends
// nothing for m.stall, unless the NIC received packets meanwhile
// (m.alive moved): a passive side waits in its end-of-run barrier for
// the whole run (write_bw's and read_bw's server), and a run longer
// than the stall, whose RDMA traffic shows the peer alive all along, is
// no stall. (With --timeout 30s, between two qemu TCG guests a write_bw
// of 5000 × 64 KiB took over 30 s and its server gave up mid-run.)
// perftest's servers wait for ever; the stall is softnic's.
func (m *comm) read(step string, n int) ([]byte, error) {
	b := make([]byte, n)
	var seen uint64
	if m.alive != nil {
		seen = m.alive()
	}
	for got := 0; got < n; {
		k, err := m.c.Read(b[got:])
		got += k
		if err == nil || got == n {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && m.alive != nil && m.ctx.Err() == nil {
			if now := m.alive(); now != seen {
				seen = now
				continue
			}
		}
		return b, m.ioErr(step, err) // EOF mid-message too: the peer closed
	}
	return b, nil
}

// xchg sends mine and returns the peer's message of n bytes.
func (m *comm) xchg(step string, mine []byte, n int) ([]byte, error) {
	if m.client {
		if err := m.write(step, mine); err != nil {
			return nil, err
		}
		return m.read(step, n)
	}
	b, err := m.read(step, n)
	if err != nil {
		return nil, err
	}
	return b, m.write(step, mine)
}

// handshake exchanges key messages (ctx_hand_shake).
func (m *comm) handshake(my Dest) (Dest, error) {
	if m.rdmaKeys {
		b, err := m.xchg("keys", MarshalRDMAKeys(my, m.gidIndex), RDMAKeySize)
		if err != nil {
			return Dest{}, err
		}
		d, err := ParseRDMAKeys(b)
		if err != nil {
			return Dest{}, &CommError{Step: "keys", Err: err}
		}
		return d, nil
	}
	n := KeyMsgSize
	if m.withGID {
		n = KeyMsgSizeGID
	}
	b, err := m.xchg("keys", MarshalKeys(my, m.withGID), n)
	if err != nil {
		return Dest{}, err
	}
	d, err := ParseKeys(b, m.withGID)
	if err != nil {
		return Dest{}, &CommError{Step: "keys", Err: err}
	}
	return d, nil
}

// versions exchanges version strings (exchange_versions) and checks the
// peer's (check_version_compatibility).
func (m *comm) versions() (string, error) {
	b, err := m.xchg("version", MarshalVersion(Version), VersionSize)
	if err != nil {
		return "", err
	}
	s, v, err := ParseVersion(b)
	if err != nil {
		return s, &CommError{Step: "version", Err: err}
	}
	if v < MinPeerVersion {
		return s, &CommError{Step: "version", Err: fmt.Errorf("Current implementation is not compatible with versions older than 5.70 (the peer is perftest %s)", s)}
	}
	m.peerVersion = v
	return s, nil
}

// sysData exchanges page ("cycle buffer") and cache-line sizes and returns
// the larger of each (check_sys_data).
func (m *comm) sysData(cycle, cacheLine int) (int, int, error) {
	if !VersionAtLeast(m.peerVersion, 5.32) {
		return cycle, cacheLine, nil
	}
	b, err := m.xchg("page size", Int32(int32(cycle)), 4)
	if err != nil {
		return 0, 0, err
	}
	c, err := m.xchg("cache line size", Int32(int32(cacheLine)), 4)
	if err != nil {
		return 0, 0, err
	}
	return max(cycle, int(ParseInt32(b))), max(cacheLine, int(ParseInt32(c))), nil
}

// reports exchanges bandwidth reports (xchg_bw_reports).
func (m *comm) reports(r Report) (Report, error) {
	mine := ReportMessages(r, m.peerVersion)
	sizes := ReportSizes(m.peerVersion)
	got := make([][]byte, len(mine))
	for i := range mine {
		b, err := m.xchg("bandwidth report", mine[i], sizes[i])
		if err != nil {
			return Report{}, err
		}
		got[i] = b
	}
	return ParseReport(got), nil
}

// closeConn is ctx_close_connection: a last handshake, then "done".
func (m *comm) closeConn(my Dest) error {
	if _, err := m.handshake(my); err != nil {
		return err
	}
	if m.rdmaKeys {
		return nil // ctx_close_connection: no "done" on rdma_cm
	}
	// Nobody reads the "done"; the peer may already have closed.
	m.c.Write([]byte("done\x00"))
	return nil
}

// listen opens the server's socket (ethernet_server_connect: AF_INET, or
// AF_INET6 with --ipv6, any address, SO_REUSEADDR).
func listen(port int, ipv6 bool) (net.Listener, error) {
	network := "tcp4"
	if ipv6 {
		network = "tcp6"
	}
	ln, err := net.Listen(network, ":"+strconv.Itoa(port))
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("Couldn't listen to port %d: TCP port %d is in use (another perftest server? pick another -p): %w", port, port, err)
		}
		return nil, fmt.Errorf("Couldn't listen to port %d: %w", port, err)
	}
	return ln, nil
}
