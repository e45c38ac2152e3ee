// Package rdmasync is the logic of softnic's rdma_server and rdma_client:
// softnic's versions of rdma-core's librdmacm/examples/rdma_server.c and
// rdma_client.c, which pair with the C tools in either role. They use the
// connection manager's synchronous calls (no event channel):
// rdma_getaddrinfo, rdma_create_ep, rdma_listen and rdma_get_request or
// rdma_connect, then one 16-byte SEND each way on an RC QP (the client
// SENDs first, the server answers), and rdma_disconnect. Options (-s,
// -p; port 7471), output lines ("rdma_server: start", "rdma_server: end
// %d") and exit statuses are the C tools'.
//
// Difference, on purpose: the QP is made on the connection's ID with
// the tool's own PD and CQs (rdma_create_qp) rather than by
// rdma_create_ep's QP attributes, so the tools need nothing of the CM
// beyond its librdmacm calls; the peer cannot tell.
package rdmasync

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/toolnic"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// The C tools' defaults.
const (
	DefaultPort   = "7471"
	DefaultServer = "127.0.0.1"
	msgSize       = 16
)

// conn is a connected ID's resources.
type conn struct {
	id        *cm.ID
	pd        *verbs.PD
	scq, rcq  *verbs.CQ
	recvMR    *verbs.MR
	sendMR    *verbs.MR
	sendFlags ibv.SendFlags
}

// setup makes the QP (max_send_wr = max_recv_wr = 1, one SGE, 16 bytes
// inline, sq_sig_all) and registers the messages (rdma_reg_msgs).
func setup(id *cm.ID, tool string, env *toolnic.Env) (*conn, error) {
	c := &conn{id: id}
	dev := id.Device()
	if dev == nil {
		return c, fmt.Errorf("rdma_create_ep: the ID has no device")
	}
	var err error
	if c.pd, err = dev.AllocPD(); err != nil {
		return c, fmt.Errorf("rdma_create_ep: %w", err)
	}
	if c.scq, err = dev.CreateCQ(1, nil); err != nil {
		return c, fmt.Errorf("rdma_create_ep: %w", err)
	}
	if c.rcq, err = dev.CreateCQ(1, nil); err != nil {
		return c, fmt.Errorf("rdma_create_ep: %w", err)
	}
	qp, err := id.CreateQP(c.pd, verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: c.scq, RecvCQ: c.rcq, SigAll: true,
		Cap: ibv.QPCap{MaxSendWR: 1, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: msgSize}})
	if err != nil {
		return c, fmt.Errorf("rdma_create_ep: %w", err)
	}
	if _, got := qp.Query(); got.Cap.MaxInlineData >= msgSize {
		c.sendFlags = ibv.SendInline
	} else {
		fmt.Fprintf(env.Out, "%s: device doesn't support IBV_SEND_INLINE, using sge sends\n", tool)
	}
	if c.recvMR, err = c.pd.RegMR(make([]byte, msgSize), ibv.AccessLocalWrite); err != nil {
		return c, fmt.Errorf("rdma_reg_msgs for recv_msg: %w", err)
	}
	if c.sendMR, err = c.pd.RegMR(make([]byte, msgSize), ibv.AccessLocalWrite); err != nil {
		return c, fmt.Errorf("rdma_reg_msgs for send_msg: %w", err)
	}
	return c, nil
}

func (c *conn) postRecv() error {
	_, err := c.id.QP().PostRecv(ibv.RecvWR{SGList: []ibv.SGE{c.recvMR.SGE(0, msgSize)}})
	return err
}

func (c *conn) postSend() error {
	_, err := c.id.QP().PostSend(ibv.SendWR{Opcode: ibv.WRSend, Flags: c.sendFlags, SGList: []ibv.SGE{c.sendMR.SGE(0, msgSize)}})
	return err
}

// comp is rdma_get_send_comp / rdma_get_recv_comp: the next completion
// (whose status, as in the C tools, is not looked at).
func comp(ctx context.Context, cq *verbs.CQ, stall time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, stall)
	defer cancel()
	var wc [1]ibv.WorkCompletion
	_, err := cq.Wait(ctx, wc[:])
	return err
}

// Recv returns the 16 bytes last received.
func (c *conn) Recv() []byte { return append([]byte(nil), c.recvMR.Buf()...) }

func (c *conn) free() {
	if c.id != nil && c.id.QP() != nil {
		c.id.DestroyQP()
	}
	for _, mr := range []*verbs.MR{c.recvMR, c.sendMR} {
		if mr != nil {
			mr.Dereg()
		}
	}
	for _, cq := range []*verbs.CQ{c.scq, c.rcq} {
		if cq != nil {
			cq.Destroy()
		}
	}
	if c.pd != nil {
		c.pd.Dealloc()
	}
	if c.id != nil {
		c.id.Destroy()
	}
}

// perror prints what perror(3) prints.
func perror(w io.Writer, what string, err error) {
	if w != nil {
		fmt.Fprintf(w, "%s: %v\n", what, err)
	}
}

// RunServer is rdma_server's main: it returns the exit status after
// printing "rdma_server: start" and "rdma_server: end %d".
func RunServer(ctx context.Context, port string, env toolnic.Env) int {
	env = env.WithDefaults()
	fmt.Fprintln(env.Out, "rdma_server: start")
	ret := runServer(ctx, port, &env)
	fmt.Fprintf(env.Out, "rdma_server: end %d\n", ret)
	return ret & 0xff
}

func runServer(ctx context.Context, port string, env *toolnic.Env) int {
	res, err := cm.GetAddrInfo(ctx, "", port, &cm.AddrInfo{Flags: cm.AIPassive, PortSpace: cm.PSTCP})
	if err != nil || len(res) == 0 {
		fmt.Fprintf(env.Out, "rdma_getaddrinfo: %v\n", gaiError(err))
		return -2 // EAI_NONAME
	}
	listen, err := env.CM.CreateEP(&res[0], nil, nil)
	if err != nil {
		perror(env.Err, "rdma_create_ep", err)
		return -1
	}
	defer listen.Destroy()
	if err := listen.Listen(0); err != nil {
		perror(env.Err, "rdma_listen", err)
		return -1
	}
	id, err := listen.GetRequest(ctx)
	if err != nil {
		perror(env.Err, "rdma_get_request", err)
		return -1
	}
	c, err := setup(id, "rdma_server", env)
	defer c.free()
	if err != nil {
		perror(env.Err, "rdma_create_ep", err)
		id.Reject(nil)
		return -1
	}
	if err := c.postRecv(); err != nil {
		perror(env.Err, "rdma_post_recv", err)
		return -1
	}
	if err := id.Accept(nil); err != nil {
		perror(env.Err, "rdma_accept", err)
		return -1
	}
	ret := 0
	if err := comp(ctx, c.rcq, env.Stall); err != nil {
		perror(env.Err, "rdma_get_recv_comp", err)
		ret = -1
	} else if err := c.postSend(); err != nil {
		perror(env.Err, "rdma_post_send", err)
		ret = -1
	} else if err := comp(ctx, c.scq, env.Stall); err != nil {
		perror(env.Err, "rdma_get_send_comp", err)
		ret = -1
	}
	id.Disconnect()
	return ret
}

// RunClient is rdma_client's main, towards server:port.
func RunClient(ctx context.Context, server, port string, env toolnic.Env) int {
	env = env.WithDefaults()
	fmt.Fprintln(env.Out, "rdma_client: start")
	ret := runClient(ctx, server, port, &env)
	fmt.Fprintf(env.Out, "rdma_client: end %d\n", ret)
	return ret & 0xff
}

func runClient(ctx context.Context, server, port string, env *toolnic.Env) int {
	res, err := cm.GetAddrInfo(ctx, server, port, &cm.AddrInfo{PortSpace: cm.PSTCP})
	if err != nil || len(res) == 0 {
		fmt.Fprintf(env.Out, "rdma_getaddrinfo: %v\n", gaiError(err))
		return -2
	}
	id, err := env.CM.CreateEP(&res[0], nil, nil)
	if err != nil {
		perror(env.Err, "rdma_create_ep", err)
		return -1
	}
	c, err := setup(id, "rdma_client", env)
	defer c.free()
	if err != nil {
		perror(env.Err, "rdma_create_ep", err)
		return -1
	}
	if err := c.postRecv(); err != nil {
		perror(env.Err, "rdma_post_recv", err)
		return -1
	}
	if err := id.Connect(nil); err != nil {
		perror(env.Err, "rdma_connect", err)
		return -1
	}
	ret := 0
	if err := c.postSend(); err != nil {
		perror(env.Err, "rdma_post_send", err)
		ret = -1
	} else if err := comp(ctx, c.scq, env.Stall); err != nil {
		perror(env.Err, "rdma_get_send_comp", err)
		ret = -1
	} else if err := comp(ctx, c.rcq, env.Stall); err != nil {
		perror(env.Err, "rdma_get_recv_comp", err)
		ret = -1
	}
	id.Disconnect()
	return ret
}

func gaiError(err error) string {
	if err == nil {
		return "No address associated with hostname"
	}
	return err.Error()
}

// ValidPort reports whether s is a port rdma_getaddrinfo takes as a
// number.
func ValidPort(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0 && n <= 65535
}
