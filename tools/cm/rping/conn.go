package rping

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/cm/cmkit"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// Info is struct rping_rdma_info: what each SEND carries.
type Info struct {
	Buf  uint64 // __be64 buf
	RKey uint32 // __be32 rkey
	Size uint32 // __be32 size
}

// Marshal writes i in its 16 wire bytes.
func (i Info) Marshal(b []byte) {
	binary.BigEndian.PutUint64(b[0:], i.Buf)
	binary.BigEndian.PutUint32(b[8:], i.RKey)
	binary.BigEndian.PutUint32(b[12:], i.Size)
}

// ParseInfo reads an rping_rdma_info; anything but 16 bytes is
// rping.c's "Received bogus data".
func ParseInfo(b []byte) (Info, error) {
	if len(b) != infoSize {
		return Info{}, fmt.Errorf("Received bogus data, size %d", len(b))
	}
	return Info{Buf: binary.BigEndian.Uint64(b), RKey: binary.BigEndian.Uint32(b[8:]),
		Size: binary.BigEndian.Uint32(b[12:])}, nil
}

// Work request IDs: rping.c posts every WR with wr_id 0; softnic keeps
// them apart only for its debug lines, the peer never sees them.
const (
	wrRecv = 1
	wrSend = 2
	wrRDMA = 3
)

// connParam is rping_init_conn_param.
func (c *cb) connParam() *cm.ConnParam {
	p := &cm.ConnParam{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}
	if c.cfg.SelfQP {
		p.QPNum = c.qp.QPN()
	}
	return p
}

// selfModifyQP is rping_self_modify_qp: INIT, RTR and RTS with
// rdma_init_qp_attr's attributes.
func (c *cb) selfModifyQP(id *cm.ID) error {
	for _, s := range []ibv.QPState{ibv.QPStateInit, ibv.QPStateRTR, ibv.QPStateRTS} {
		attr, mask, err := id.InitQPAttr(s)
		if err != nil {
			return err
		}
		if err := c.qp.Modify(&attr, mask); err != nil {
			return err
		}
	}
	return nil
}

// setupQP is rping_setup_qp and rping_create_qp: PD, CQ, QP on the ID's
// device.
func (c *cb) setupQP(id *cm.ID) error {
	dev := id.Device()
	if dev == nil {
		return fmt.Errorf("ibv_alloc_pd failed: the ID has no device")
	}
	var err error
	if c.pd, err = dev.AllocPD(); err != nil {
		c.run.errorf("ibv_alloc_pd failed\n")
		return err
	}
	c.debugf("created pd %p\n", c.pd)
	if c.cq, err = dev.CreateCQ(sqDepth*2, nil); err != nil {
		c.run.errorf("ibv_create_cq failed\n")
		return err
	}
	c.debugf("created cq %p\n", c.cq)
	init := verbs.QPInitAttr{Type: ibv.QPTypeRC, SendCQ: c.cq, RecvCQ: c.cq,
		Cap: ibv.QPCap{MaxSendWR: sqDepth, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}}
	if c.cfg.SelfQP {
		if c.qp, err = c.pd.CreateQP(init); err != nil {
			c.run.errorf("ibv_create_qp: %v\n", err)
			return err
		}
		attr := ibv.QPAttr{State: ibv.QPStateInit, PKeyIndex: 0, PortNum: 1}
		if err := c.qp.Modify(&attr, ibv.QPAttrState|ibv.QPAttrPKeyIndex|ibv.QPAttrPort|ibv.QPAttrAccessFlags); err != nil {
			c.run.errorf("ibv_modify_qp: %v\n", err)
			return err
		}
	} else if c.qp, err = id.CreateQP(c.pd, init); err != nil {
		c.run.errorf("rdma_create_qp: %v\n", err)
		return err
	}
	c.debugf("created qp %p\n", c.qp)
	return nil
}

// setupBuffers is rping_setup_buffers.
func (c *cb) setupBuffers() error {
	c.debugf("rping_setup_buffers called on cb %p\n", c)
	var err error
	remote := ibv.AccessLocalWrite | ibv.AccessRemoteRead | ibv.AccessRemoteWrite
	if c.recvMR, err = c.pd.RegMR(make([]byte, infoSize), ibv.AccessLocalWrite); err != nil {
		c.run.errorf("recv_buf reg_mr failed\n")
		return err
	}
	if c.sendMR, err = c.pd.RegMR(make([]byte, infoSize), 0); err != nil {
		c.run.errorf("send_buf reg_mr failed\n")
		return err
	}
	if c.rdmaMR, err = c.pd.RegMR(make([]byte, c.cfg.Size), remote); err != nil {
		c.run.errorf("rdma_buf reg_mr failed\n")
		return err
	}
	if !c.server {
		if c.startMR, err = c.pd.RegMR(make([]byte, c.cfg.Size), remote); err != nil {
			c.run.errorf("start_buf reg_mr failed\n")
			return err
		}
	}
	c.debugf("allocated & registered buffers...\n")
	return nil
}

// free is rping_free_buffers and rping_free_qp, for what was made.
func (c *cb) free(id *cm.ID) {
	c.debugf("rping_free_buffers called on cb %p\n", c)
	for _, mr := range []*verbs.MR{c.recvMR, c.sendMR, c.rdmaMR, c.startMR} {
		if mr != nil {
			mr.Dereg()
		}
	}
	if c.qp != nil {
		if c.cfg.SelfQP || id == nil {
			c.qp.Destroy()
		} else {
			id.DestroyQP()
		}
	}
	if c.cq != nil {
		c.cq.Destroy()
	}
	if c.pd != nil {
		c.pd.Dealloc()
	}
}

func (c *cb) postRecv() error {
	_, err := c.qp.PostRecv(ibv.RecvWR{WRID: wrRecv, SGList: []ibv.SGE{c.recvMR.SGE(0, infoSize)}})
	return err
}

func (c *cb) postSend() error {
	_, err := c.qp.PostSend(ibv.SendWR{WRID: wrSend, Opcode: ibv.WRSend, Flags: ibv.SendSignaled,
		SGList: []ibv.SGE{c.sendMR.SGE(0, infoSize)}})
	return err
}

// postRDMA posts the server's signaled RDMA READ or WRITE of n bytes
// between its rdma buffer and the peer's advertised one.
func (c *cb) postRDMA(op ibv.WROpcode, n uint32) error {
	_, err := c.qp.PostSend(ibv.SendWR{WRID: wrRDMA, Opcode: op, Flags: ibv.SendSignaled,
		SGList:     []ibv.SGE{{Addr: c.rdmaMR.Addr(), Length: n, LKey: c.rdmaMR.LKey()}},
		RemoteAddr: c.remoteAddr, RKey: c.remoteRKey})
	return err
}

// formatSend is rping_format_send: the send buffer names mr.
func (c *cb) formatSend(mr *verbs.MR) {
	i := Info{Buf: mr.Addr(), RKey: mr.RKey(), Size: uint32(c.cfg.Size)}
	i.Marshal(c.sendMR.Buf())
	c.debugf("RDMA addr %x rkey %x len %d\n", i.Buf, i.RKey, i.Size)
}

// startCQThread starts cq_thread.
func (c *cb) startCQThread(ctx context.Context) {
	cqCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cqCancel, c.cqDone = cancel, make(chan struct{})
	go func() {
		defer close(c.cqDone)
		c.debugf("cq_thread started.\n")
		wc := make([]ibv.WorkCompletion, sqDepth*2)
		for {
			n, err := c.cq.Wait(cqCtx, wc)
			if err != nil {
				if cqCtx.Err() == nil {
					c.run.errorf("Failed to get cq event!\n")
				}
				return
			}
			if c.cqHandler(wc[:n]) != 0 {
				return
			}
		}
	}()
}

// joinCQThread is pthread_join(cb->cqthread): the thread ends on the
// flush that the disconnect's move to ERR brings; a peer that never lets
// it come is bounded by the stall time.
func (c *cb) joinCQThread() {
	if c.cqDone == nil {
		return
	}
	select {
	case <-c.cqDone:
	case <-time.After(c.env.Stall):
	}
	c.cqCancel()
	<-c.cqDone
}

// cqHandler is rping_cq_event_handler on a batch of completions: 1 when
// a flushed WR was seen (the thread ends), -1 on an error.
func (c *cb) cqHandler(wcs []ibv.WorkCompletion) int {
	flushed := 0
	for _, wc := range wcs {
		if wc.Status != ibv.WCSuccess {
			if wc.Status == ibv.WCWRFlushErr {
				flushed = 1
				continue
			}
			c.run.errorf("cq completion failed status %d\n", wc.Status)
			c.setState(stError)
			c.post()
			return -1
		}
		switch wc.Opcode {
		case ibv.WCSend:
			c.debugf("send completion\n")
		case ibv.WCRDMAWrite:
			c.debugf("rdma write completion\n")
			c.setState(stRDMAWriteComplete)
			c.post()
		case ibv.WCRDMARead:
			c.debugf("rdma read completion\n")
			c.setState(stRDMAReadComplete)
			c.post()
		case ibv.WCRecv:
			c.debugf("recv completion\n")
			var ret int
			if c.server {
				ret = c.serverRecv(wc)
			} else {
				ret = c.clientRecv(wc)
			}
			if ret != 0 {
				c.run.errorf("recv wc error: %d\n", ret)
				c.setState(stError)
				c.post()
				return -1
			}
			if err := c.postRecv(); err != nil {
				c.run.errorf("post recv error: %d\n", errnoOf(err))
				c.setState(stError)
				c.post()
				return -1
			}
			c.post()
		default:
			c.debugf("unknown!!!!! completion\n")
			c.setState(stError)
			c.post()
			return -1
		}
	}
	return flushed
}

// serverRecv is server_recv: the client's buffer to READ or WRITE.
func (c *cb) serverRecv(wc ibv.WorkCompletion) int {
	info, err := ParseInfo(c.recvMR.Buf()[:min(int(wc.ByteLen), infoSize)])
	if err != nil || wc.ByteLen != infoSize {
		c.run.errorf("Received bogus data, size %d\n", wc.ByteLen)
		return -1
	}
	c.remoteRKey, c.remoteAddr, c.remoteLen = info.RKey, info.Buf, info.Size
	c.debugf("Received rkey %x addr %x len %d from peer\n", c.remoteRKey, c.remoteAddr, c.remoteLen)
	c.mu.Lock()
	if c.state <= stConnected || c.state == stRDMAWriteComplete {
		c.state = stRDMAReadAdv
	} else {
		c.state = stRDMAWriteAdv
	}
	c.mu.Unlock()
	return 0
}

// clientRecv is client_recv: a go-ahead.
func (c *cb) clientRecv(wc ibv.WorkCompletion) int {
	if wc.ByteLen != infoSize {
		c.run.errorf("Received bogus data, size %d\n", wc.ByteLen)
		return -1
	}
	c.mu.Lock()
	if c.state == stRDMAReadAdv {
		c.state = stRDMAWriteAdv
	} else {
		c.state = stRDMAWriteComplete
	}
	c.mu.Unlock()
	return 0
}

func errnoOf(err error) int {
	var e interface{ Errno() uintptr }
	if errors.As(err, &e) {
		return int(e.Errno())
	}
	return -1
}

// expect waits (sem_wait) and checks the state; what is the C tool's
// "wait for <what> state %d" line on a mismatch.
func (c *cb) expect(ctx context.Context, want state, what string) bool {
	if err := c.wait(ctx); err != nil {
		c.run.errorf("wait for %s: %v\n", what, err)
		return false
	}
	if s := c.getState(); s != want {
		c.run.errorf("wait for %s state %d\n", what, s)
		return false
	}
	return true
}

// testServer is rping_test_server: 0 when the client disconnected.
func (c *cb) testServer(ctx context.Context) int {
	ret := 0
	rdma := c.rdmaMR.Buf()
	for {
		// Wait for the client's source address and key.
		if !c.expect(ctx, stRDMAReadAdv, "RDMA_READ_ADV") {
			ret = -1
			break
		}
		c.debugf("server received sink adv\n")
		// Issue the RDMA READ.
		if err := c.postRDMA(ibv.WRRDMARead, c.remoteLen); err != nil {
			c.run.errorf("post send error %d\n", errnoOf(err))
			ret = -1
			break
		}
		c.debugf("server posted rdma read req \n")
		if !c.expect(ctx, stRDMAReadComplete, "RDMA_READ_COMPLETE") {
			ret = -1
			break
		}
		c.debugf("server received read complete\n")
		if c.cfg.Verbose {
			c.run.printf(c.env.Out, "server ping data: %s\n", cString(rdma))
		}
		// Tell the client to continue.
		if err := c.postSend(); err != nil {
			c.run.errorf("post send error %d\n", errnoOf(err))
			ret = -1
			break
		}
		c.debugf("server posted go ahead\n")
		// Wait for the client's sink address and key.
		if !c.expect(ctx, stRDMAWriteAdv, "RDMA_WRITE_ADV") {
			ret = -1
			break
		}
		c.debugf("server received sink adv\n")
		// RDMA WRITE the string back: strlen(rdma_buf) + 1 bytes.
		n := uint32(len(cString(rdma)) + 1)
		if int(n) > len(rdma) {
			n = uint32(len(rdma))
		}
		c.debugf("rdma write from lkey %x laddr %x len %d\n", c.rdmaMR.LKey(), c.rdmaMR.Addr(), n)
		if err := c.postRDMA(ibv.WRRDMAWrite, n); err != nil {
			c.run.errorf("post send error %d\n", errnoOf(err))
			ret = -1
			break
		}
		if !c.expect(ctx, stRDMAWriteComplete, "RDMA_WRITE_COMPLETE") {
			ret = -1
			break
		}
		c.debugf("server rdma write complete \n")
		// Tell the client to begin again.
		if err := c.postSend(); err != nil {
			c.run.errorf("post send error %d\n", errnoOf(err))
			ret = -1
			break
		}
		c.debugf("server posted go ahead\n")
	}
	if c.getState() == stDisconnected {
		return 0
	}
	return ret
}

// testClient is rping_test_client.
func (c *cb) testClient(ctx context.Context) int {
	ret := 0
	start := c.startMR.Buf()
	rdma := c.rdmaMR.Buf()
	for ping := 0; c.cfg.Count == 0 || ping < c.cfg.Count; ping++ {
		c.setState(stRDMAReadAdv)
		fillPattern(start, ping)
		c.formatSend(c.startMR)
		if err := c.postSend(); err != nil {
			c.run.errorf("post send error %d\n", errnoOf(err))
			ret = -1
			break
		}
		// Wait for the server to ACK.
		if !c.expect(ctx, stRDMAWriteAdv, "RDMA_WRITE_ADV") {
			ret = -1
			break
		}
		c.formatSend(c.rdmaMR)
		if err := c.postSend(); err != nil {
			c.run.errorf("post send error %d\n", errnoOf(err))
			ret = -1
			break
		}
		// Wait for the server to say the RDMA WRITE is complete.
		if !c.expect(ctx, stRDMAWriteComplete, "RDMA_WRITE_COMPLETE") {
			ret = -1
			break
		}
		if c.cfg.Validate && !bytes.Equal(start, rdma) {
			c.run.errorf("data mismatch!\n")
			ret = -1
			break
		}
		if c.cfg.Verbose {
			c.run.printf(c.env.Out, "ping data: %s\n", cString(rdma))
		}
	}
	if c.getState() == stDisconnected {
		return 0
	}
	return ret
}

// bindServer is rping_bind_server.
func (r *runner) bindServer(c *cb) int {
	addr := r.cfg.Addr
	if !addr.IsValid() {
		addr = netip.IPv4Unspecified() // sin.ss_family = PF_INET, INADDR_ANY
	}
	if err := c.id.BindAddr(netip.AddrPortFrom(addr, r.cfg.Port)); err != nil {
		r.errorf("rdma_bind_addr: %v\n", err)
		return -1
	}
	c.debugf("rdma_bind_addr successful\n")
	c.debugf("rdma_listen\n")
	if err := c.id.Listen(3); err != nil {
		r.errorf("rdma_listen: %v\n", err)
		return -1
	}
	return 0
}

// accept is rping_accept.
func (c *cb) accept(ctx context.Context) int {
	c.debugf("accepting client connection request\n")
	var err error
	if c.cfg.SelfQP {
		if err = c.selfModifyQP(c.child); err == nil {
			err = c.child.Accept(c.connParam())
		}
	} else {
		err = c.child.Accept(nil)
	}
	if err != nil {
		c.run.errorf("rdma_accept: %v\n", err)
		return -1
	}
	if err := c.wait(ctx); err != nil || c.getState() == stError {
		c.run.errorf("wait for CONNECTED state %d\n", c.getState())
		return -1
	}
	return 0
}

// serveConn is the part rping_run_server and
// rping_persistent_server_thread share: QP, buffers, the receive, the CQ
// thread, accept, the test, disconnect. It returns rping's status.
func (c *cb) serveConn(ctx context.Context) int {
	if err := c.setupQP(c.child); err != nil {
		c.run.errorf("setup_qp failed: %d\n", errnoOf(err))
		c.free(c.child)
		return -1
	}
	defer c.free(c.child)
	if err := c.setupBuffers(); err != nil {
		c.run.errorf("rping_setup_buffers failed: %d\n", errnoOf(err))
		return -1
	}
	if err := c.postRecv(); err != nil {
		c.run.errorf("ibv_post_recv failed: %d\n", errnoOf(err))
		return -1
	}
	c.startCQThread(ctx)
	if c.accept(ctx) != 0 {
		c.run.errorf("connect error %d\n", -1)
		c.cqCancel()
		<-c.cqDone
		return -1
	}
	ret := c.testServer(ctx)
	if ret != 0 && !c.cfg.Persistent {
		c.run.errorf("rping server failed: %d\n", ret)
	}
	c.disconnect(c.child)
	c.joinCQThread()
	// rdma_destroy_id(cb->child_cm_id) comes after the QP in softnic:
	// the CM's ID owns the QP it made.
	c.free(c.child)
	c.qp, c.cq, c.pd = nil, nil, nil
	c.recvMR, c.sendMR, c.rdmaMR, c.startMR = nil, nil, nil, nil
	c.child.Destroy()
	return ret
}

// disconnect is rping_disconnect.
func (c *cb) disconnect(id *cm.ID) {
	if c.cfg.SelfQP {
		if err := c.qp.Modify(&ibv.QPAttr{State: ibv.QPStateErr}, ibv.QPAttrState); err != nil {
			return
		}
	}
	id.Disconnect()
}

// runServer is rping_run_server.
func (r *runner) runServer(ctx context.Context, c *cb) int {
	if ret := r.bindServer(c); ret != 0 {
		return ret
	}
	if !c.expect(ctx, stConnectRequest, "CONNECT_REQUEST") {
		return -1
	}
	r.setCB(c.child, c)
	return c.serveConn(ctx)
}

// runPersistentServer is rping_run_persistent_server: each connection
// request gets a copy of the listener's control block and a goroutine.
func (r *runner) runPersistentServer(ctx context.Context, listening *cb) int {
	if ret := r.bindServer(listening); ret != 0 {
		return ret
	}
	done := make(chan struct{}, 1024)
	started, ended := 0, 0
	for r.env.Conns == 0 || started < r.env.Conns {
		if err := r.waitForever(ctx, listening); err != nil {
			break
		}
		if s := listening.getState(); s != stConnectRequest {
			r.errorf("wait for CONNECT_REQUEST state %d\n", s)
			return -1
		}
		child := r.newCB() // clone_cb
		child.server = true
		listening.mu.Lock()
		child.id, child.child = listening.id, listening.child
		listening.mu.Unlock()
		r.setCB(child.child, child)
		listening.acceptReady <- struct{}{} // sem_post(&listening_cb->accept_ready)
		started++
		go func() {
			child.serveConn(ctx)
			done <- struct{}{}
		}()
	}
	for ended < started {
		<-done
		ended++
	}
	return 0
}

// waitForever is the listener's sem_wait: a persistent server waits for
// clients until it is stopped.
func (r *runner) waitForever(ctx context.Context, c *cb) error {
	select {
	case <-c.sem:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// bindClient is rping_bind_client: resolve the address, then (in the
// event handler) the route.
func (r *runner) bindClient(ctx context.Context, c *cb) int {
	var src netip.AddrPort
	if r.cfg.Src.IsValid() {
		src = netip.AddrPortFrom(r.cfg.Src, 0)
	}
	dst := r.cfg.Addr
	if !dst.IsValid() {
		dst = netip.IPv4Unspecified()
	}
	if err := c.id.ResolveAddr(src, netip.AddrPortFrom(dst, r.cfg.Port), cmkit.ResolveTimeout); err != nil {
		r.errorf("rdma_resolve_addr: %v\n", err)
		return -1
	}
	if err := c.wait(ctx); err != nil {
		r.errorf("waiting for addr/route resolution: %v\n", err)
		return -1
	}
	if s := c.getState(); s != stRouteResolved {
		r.errorf("waiting for addr/route resolution state %d\n", s)
		return -1
	}
	c.debugf("rdma_resolve_addr - rdma_resolve_route successful\n")
	return 0
}

// connectClient is rping_connect_client.
func (c *cb) connectClient(ctx context.Context) int {
	if err := c.id.Connect(c.connParam()); err != nil {
		c.run.errorf("rdma_connect: %v\n", err)
		return -1
	}
	if !c.expect(ctx, stConnected, "CONNECTED") {
		return -1
	}
	if c.cfg.SelfQP {
		if err := c.selfModifyQP(c.id); err != nil {
			c.run.errorf("rping_modify_qp: %v\n", err)
			return -1
		}
		// rdma_establish: on an active ID without a CM-made QP, the
		// CM's Accept after CONNECT_RESPONSE sends the RTU (librdmacm's
		// rdma_establish is that ACCEPT).
		if err := c.id.Accept(nil); err != nil {
			c.run.errorf("rdma_establish: %v\n", err)
			return -1
		}
	}
	c.debugf("rdma_connect successful\n")
	return 0
}

// runClient is rping_run_client.
func (r *runner) runClient(ctx context.Context, c *cb) int {
	if ret := r.bindClient(ctx, c); ret != 0 {
		return ret
	}
	if err := c.setupQP(c.id); err != nil {
		r.errorf("setup_qp failed: %d\n", errnoOf(err))
		c.free(c.id)
		return -1
	}
	defer func() {
		c.free(c.id)
		c.qp = nil
	}()
	if err := c.setupBuffers(); err != nil {
		r.errorf("rping_setup_buffers failed: %d\n", errnoOf(err))
		return -1
	}
	if err := c.postRecv(); err != nil {
		r.errorf("ibv_post_recv failed: %d\n", errnoOf(err))
		return -1
	}
	c.startCQThread(ctx)
	if ret := c.connectClient(ctx); ret != 0 {
		r.errorf("connect error %d\n", ret)
		c.cqCancel()
		<-c.cqDone
		return ret
	}
	ret := c.testClient(ctx)
	if ret != 0 {
		r.errorf("rping client failed: %d\n", ret)
	}
	c.disconnect(c.id)
	c.joinCQThread()
	return ret
}
