// Package cmkit is the skeleton that librdmacm's cmatose.c, udaddy.c and
// mckey.c share (struct cmatest and cmatest_node, connect_events, the
// message buffers, post_recvs, poll_cqs, the "return status" ending),
// which softnic's ucmatose, udaddy and mckey take from this one place:
// each tool keeps only its flags, its event handling and its lines.
package cmkit

import (
	"context"
	"fmt"
	"time"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/verbs"
	"github.com/softnic/softnic/verbs/cm"
)

// Status is a run's outcome as the C tools' main returns it: the exit
// status is Code & 0xff, and the last line printed is
// "return status <Code>".
type Status struct{ Code int }

func (s *Status) Error() string { return fmt.Sprintf("return status %d", s.Code) }

// Printf is where a tool's lines go (its printf).
type Printf func(format string, args ...any)

// End is the C tools' ending: "test complete", destroyNodes, the event
// channel's close (rdma_destroy_event_channel), "return status <ret>". It
// returns nil for ret 0, else a *Status.
func End(printf Printf, ret int, destroyNodes func(), ch *cm.EventChannel) error {
	printf("test complete\n")
	destroyNodes()
	ch.Close()
	printf("return status %d\n", ret)
	if ret != 0 {
		return &Status{Code: ret}
	}
	return nil
}

// Events is connect_events (and cmatose.c's disconnect_events): while
// *left is above 0 and the handler returned 0, it takes the channel's
// next event (each wait bounded by stall), hands it to handle and acks
// it. It returns the handler's last status, or the error of a wait (the
// caller prints its line and picks its status).
func Events(ctx context.Context, ch *cm.EventChannel, stall time.Duration, left *int, handle func(*cm.Event) int) (int, error) {
	ret := 0
	for *left > 0 && ret == 0 {
		wctx, cancel := context.WithTimeout(ctx, stall)
		ev, err := ch.GetEvent(wctx)
		cancel()
		if err != nil {
			return ret, err
		}
		ret = handle(ev)
		ev.Ack()
	}
	return ret, nil
}

// PollCQ is poll_cqs on one CQ: it waits for count completions (each wait
// bounded by stall), handing each batch to batch when it is not nil.
func PollCQ(ctx context.Context, cq *verbs.CQ, count int, stall time.Duration, wc []ibv.WorkCompletion,
	batch func(wc []ibv.WorkCompletion)) error {
	for done := 0; done < count; {
		wctx, cancel := context.WithTimeout(ctx, stall)
		got, err := cq.Wait(wctx, wc)
		cancel()
		if err != nil {
			return err
		}
		if batch != nil {
			batch(wc[:got])
		}
		done += got
	}
	return nil
}

// GRHSize is the room a UD receive buffer keeps for the GRH.
const GRHSize = 40 // sizeof(struct ibv_grh)

// UDNode is udaddy.c's and mckey.c's struct cmatest_node: an ID with its
// UD QP, one CQ, the message buffer, and the peer's address handle, QPN
// and Q_Key.
type UDNode struct {
	Idx        int
	ID         *cm.ID
	Connected  bool
	PD         *verbs.PD
	CQ         *verbs.CQ
	MR         *verbs.MR
	AH         *verbs.AH
	RemoteQPN  uint32
	RemoteQKey uint32
}

// VerifyMTU is verify_test_params: with messages, one must fit the port's
// active MTU (-EINVAL). prog names the tool in the line.
func (n *UDNode) VerifyMTU(prog string, count, size int, printf Printf) int {
	port, err := n.ID.Device().QueryPort(1)
	if err != nil {
		return -1
	}
	if mtu := port.ActiveMTU.Bytes(); count > 0 && size > mtu {
		printf("%s: message_size %d is larger than active mtu %d\n", prog, size, mtu)
		return -22
	}
	return 0
}

// Init is init_node: the PD, one CQ of 2*count entries (2 without
// messages), the UD QP of count WRs each way (1 without), and the
// message buffer of size bytes after the GRH's room. perror prints the
// line of an error.
func (n *UDNode) Init(prog string, count, size int, printf Printf, perror func(string, error)) int {
	dev := n.ID.Device()
	var err error
	if n.PD, err = dev.AllocPD(); err != nil {
		printf("%s: unable to allocate PD\n", prog)
		return -12
	}
	cqe, wr := 2, 1
	if count > 0 {
		cqe, wr = 2*count, count
	}
	if n.CQ, err = dev.CreateCQ(cqe, nil); err != nil {
		printf("%s: unable to create CQ\n", prog)
		return -12
	}
	if _, err := n.ID.CreateQP(n.PD, verbs.QPInitAttr{Type: ibv.QPTypeUD, SendCQ: n.CQ, RecvCQ: n.CQ,
		Cap: ibv.QPCap{MaxSendWR: uint32(wr), MaxRecvWR: uint32(wr), MaxSendSGE: 1, MaxRecvSGE: 1}}); err != nil {
		perror(prog+": unable to create QP", err)
		return -1
	}
	if count > 0 {
		if n.MR, err = n.PD.RegMR(make([]byte, size+GRHSize), ibv.AccessLocalWrite); err != nil {
			printf("failed to reg MR\n")
			printf("%s: failed to create messages: %d\n", prog, -1)
			return -1
		}
	}
	return 0
}

// PostRecvs is post_recvs: count receives of size bytes and the GRH.
func (n *UDNode) PostRecvs(count, size int, printf Printf) int {
	for i := 0; i < count; i++ {
		if _, err := n.ID.QP().PostRecv(ibv.RecvWR{WRID: uint64(n.Idx),
			SGList: []ibv.SGE{n.MR.SGE(0, size+GRHSize)}}); err != nil {
			printf("failed to post receives: %d\n", -1)
			return -1
		}
	}
	return 0
}

// PostSends is post_sends: count SEND_WITH_IMMs of size bytes carrying
// the sender's QPN, on a connected node; flags gives the i'th one's flags.
func (n *UDNode) PostSends(count, size int, flags func(i int) ibv.SendFlags, printf Printf) int {
	if !n.Connected || count == 0 {
		return 0
	}
	for i := 0; i < count; i++ {
		if _, err := n.ID.QP().PostSend(ibv.SendWR{WRID: uint64(n.Idx), Opcode: ibv.WRSendWithImm, Flags: flags(i),
			Imm: n.ID.QP().QPN(), AH: n.AH, RemoteQPN: n.RemoteQPN, RemoteQKey: n.RemoteQKey,
			SGList: []ibv.SGE{n.MR.SGE(0, size)}}); err != nil {
			printf("failed to post sends: %d\n", -1)
			return -1
		}
	}
	return 0
}

// Destroy is destroy_node: the AH, QP, CQ, MR and PD, then the ID (a
// node without an ID has nothing).
func (n *UDNode) Destroy() {
	if n.ID == nil {
		return
	}
	if n.AH != nil {
		n.AH.Destroy()
	}
	if n.ID.QP() != nil {
		n.ID.DestroyQP()
	}
	if n.CQ != nil {
		n.CQ.Destroy()
	}
	if n.MR != nil {
		n.MR.Dereg()
	}
	if n.PD != nil {
		n.PD.Dealloc()
	}
	n.ID.Destroy()
}

// AllocNodes is alloc_nodes: n nodes made by newNode; with ids, each
// gets an ID on ch in ps (the node its context), handed to it by set. At
// a failure it destroys the IDs it made, closes ch and returns a
// *Status of 1, as the C tools' main does.
func AllocNodes[N any](c *cm.CM, ch *cm.EventChannel, n int, newNode func(i int) N, ids bool,
	ps cm.PortSpace, qpType ibv.QPType, set func(n N, id *cm.ID)) ([]N, error) {
	nodes := make([]N, n)
	for i := range nodes {
		nodes[i] = newNode(i)
	}
	if !ids {
		return nodes, nil
	}
	var made []*cm.ID
	for _, n := range nodes {
		id, err := c.CreateID(ch, n, ps, qpType)
		if err != nil {
			for _, id := range made {
				id.Destroy()
			}
			ch.Close()
			return nil, &Status{Code: 1}
		}
		made = append(made, id)
		set(n, id)
	}
	return nodes, nil
}

// Prepare is what udaddy.c's and mckey.c's handlers do first:
// verify_test_params, init_node and (with recvs) post_recvs, stopping at
// the first that fails.
func (n *UDNode) Prepare(prog string, count, size int, recvs bool, printf Printf, perror func(string, error)) int {
	ret := n.VerifyMTU(prog, count, size, printf)
	if ret == 0 {
		ret = n.Init(prog, count, size, printf, perror)
	}
	if ret == 0 && recvs {
		ret = n.PostRecvs(count, size, printf)
	}
	return ret
}

// SetPeer takes the peer's QPN, Q_Key and address handle from a
// resolution or join event (udaddy.c's resolved_handler, mckey.c's
// join_handler); the node is connected unless the handle fails (-1).
func (n *UDNode) SetPeer(prog string, p cm.UDParam, printf Printf) int {
	n.RemoteQPN, n.RemoteQKey = p.QPNum, p.QKey
	ah, err := n.PD.CreateAH(p.AHAttr)
	if err != nil {
		printf("%s: failure creating address handle\n", prog)
		return -1
	}
	n.AH = ah
	n.Connected = true
	return 0
}
