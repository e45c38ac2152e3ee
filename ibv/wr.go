package ibv

// WROpcode is a send work request's operation (enum ibv_wr_opcode).
type WROpcode uint8

const (
	WRRDMAWrite         WROpcode = 0  // IBV_WR_RDMA_WRITE
	WRRDMAWriteWithImm  WROpcode = 1  // IBV_WR_RDMA_WRITE_WITH_IMM
	WRSend              WROpcode = 2  // IBV_WR_SEND
	WRSendWithImm       WROpcode = 3  // IBV_WR_SEND_WITH_IMM
	WRRDMARead          WROpcode = 4  // IBV_WR_RDMA_READ
	WRAtomicCmpAndSwp   WROpcode = 5  // IBV_WR_ATOMIC_CMP_AND_SWP
	WRAtomicFetchAndAdd WROpcode = 6  // IBV_WR_ATOMIC_FETCH_AND_ADD
	WRLocalInv          WROpcode = 7  // IBV_WR_LOCAL_INV
	WRBindMW            WROpcode = 8  // IBV_WR_BIND_MW
	WRSendWithInv       WROpcode = 9  // IBV_WR_SEND_WITH_INV
	WRTSO               WROpcode = 10 // IBV_WR_TSO: UD segmentation offload (TSOHeader, MSS)
	WRDriver1           WROpcode = 11 // IBV_WR_DRIVER1 (not supported)
	WRFlush             WROpcode = 14 // IBV_WR_FLUSH
	WRAtomicWrite       WROpcode = 15 // IBV_WR_ATOMIC_WRITE
	// WRRegMR is the kernel's IB_WR_REG_MR (fast registration), which
	// libibverbs has no value for; softnic gives it one past the range.
	WRRegMR WROpcode = 32
)

// SendFlags are a send work request's flags (enum ibv_send_flags).
type SendFlags uint32

const (
	// SendFence (IBV_SEND_FENCE): wait for the QP's outstanding READs
	// and atomics before starting this WR.
	SendFence SendFlags = 1 << 0
	// SendSignaled (IBV_SEND_SIGNALED): complete the WR on the send CQ
	// (always, on a QP created with SigAll).
	SendSignaled SendFlags = 1 << 1
	// SendSolicited (IBV_SEND_SOLICITED): set the solicited event bit, so
	// a CQ armed for solicited events wakes its waiter.
	SendSolicited SendFlags = 1 << 2
	// SendInline (IBV_SEND_INLINE): the payload is copied when the WR is
	// posted; its buffer may be reused at once.
	SendInline SendFlags = 1 << 3
	// SendIPCsum (IBV_SEND_IP_CSUM): offload checksums (raw packet and
	// UD LSO QPs only; not supported).
	SendIPCsum SendFlags = 1 << 4
)

// SGE is a scatter/gather element (struct ibv_sge): Length bytes at Addr in
// the memory region whose lkey is LKey.
type SGE struct {
	Addr   uint64 // addr: an address inside the MR (its IOVA space)
	Length uint32 // length in bytes
	LKey   uint32 // lkey: the local key of an MR (a memory window's key is refused)
}

// SendWR is a send work request (struct ibv_send_wr). A batch is a slice
// rather than a chain of next pointers, and the SGE list a slice rather
// than sg_list and num_sge; the unions of the C struct are separate
// fields. Which fields an opcode reads is what ibv_post_send(3) says.
type SendWR struct {
	WRID   uint64    // wr_id: returned in the WR's completion
	Opcode WROpcode  // opcode
	Flags  SendFlags // send_flags
	SGList []SGE     // sg_list and num_sge: the local data
	// Imm is imm_data: the immediate data of SEND_WITH_IMM and
	// RDMA_WRITE_WITH_IMM, as the 32-bit value the receiver's completion
	// reports (WorkCompletion.Imm).
	Imm uint32
	// InvRKey is invalidate_rkey (the union partner of imm_data): the
	// remote key SEND_WITH_INV invalidates at the receiver, or the local
	// key LOCAL_INV invalidates.
	InvRKey uint32

	// RemoteAddr and RKey are wr.rdma.remote_addr and wr.rdma.rkey (or
	// wr.atomic's): the target of READ, WRITE, FLUSH, ATOMIC_WRITE and
	// the atomics, which must name memory the peer registered with the
	// matching access.
	RemoteAddr uint64
	RKey       uint32

	// CompareAdd is wr.atomic.compare_add: the compare value of
	// CMP_AND_SWP or the add value of FETCH_AND_ADD. Swap is
	// wr.atomic.swap, CMP_AND_SWP's new value. ATOMIC_WRITE takes its 8
	// bytes from SGList or InlineData.
	CompareAdd uint64
	Swap       uint64

	// AH, RemoteQPN and RemoteQKey are wr.ud.ah, wr.ud.remote_qpn and
	// wr.ud.remote_qkey: a UD datagram's destination. A RemoteQKey with
	// the high-order bit set stands for the sending QP's own Q_Key (IBTA
	// 10.2.5; rxe sends it verbatim instead).
	AH         AddressHandle
	RemoteQPN  uint32
	RemoteQKey uint32

	// FlushType, FlushLevel and FlushLen are ibv_wr_flush's type
	// (IB_FLUSH_GLOBAL or IB_FLUSH_PERSISTENT), level (IB_FLUSH_RANGE or
	// IB_FLUSH_MR) and length: FLUSH carries no local data.
	FlushType  uint8
	FlushLevel uint8
	FlushLen   uint32

	// TSOHeader and MSS are wr.tso.hdr (with wr.tso.hdr_sz, its length)
	// and wr.tso.mss of a TSO WR (IBV_WR_TSO, ibv_wr_send_tso): the
	// payload, from SGList or InlineData, is sent in pieces of MSS bytes
	// (the last may be shorter), each as a datagram of its own that
	// starts with a copy of TSOHeader. The header is copied at post.
	TSOHeader []byte
	MSS       uint16

	// RemoteSRQN is qp_type.xrc.remote_srqn (ibv_wr_set_xrc_srqn): on an
	// XRC_SEND QP, the number of the XRC SRQ at the target (SRQ.Num
	// there) that a SEND's receive is taken from and whose PD checks the
	// rkey of a WRITE, READ or atomic. It travels in the XRCETH of every
	// request packet of the WR (IBTA 9.3.7); other QP types ignore it.
	RemoteSRQN uint32

	// InlineData, when non-nil with SendInline, is the payload: the Go
	// form of ibv_wr_set_inline_data, copied at post. Without it an
	// inline WR's data is read from SGList at post.
	InlineData []byte

	// Bind is bind_mw (BIND_MW), Reg the kernel's ib_reg_wr (REG_MR).
	Bind *MWBindWR
	Reg  *RegMRWR
}

// MWBindWR is the bind of a memory window (the bind_mw member of struct
// ibv_send_wr, with its struct ibv_mw_bind_info).
type MWBindWR struct {
	MWHandle uint32 // bind_mw.mw: the window, by its rkey at the time of the bind
	NewRKey  uint32 // bind_mw.rkey: its rkey after the bind (type 2: the caller picks the key byte)
	MRLKey   uint32 // bind_info.mr: the MR the window is bound to, by its lkey
	Addr     uint64 // bind_info.addr: the window's first byte
	Length   uint64 // bind_info.length: the window's length (0 unbinds)
	Access   Access // bind_info.mw_access_flags: the remote rights the window grants
}

// RegMRWR is a fast-registration work request (the kernel's struct
// ib_reg_wr; libibverbs has none).
type RegMRWR struct {
	// MR is ib_reg_wr.mr: the engine's fast-registration MR (the *mem.MR
	// behind a verbs MR), named directly, so a REG_MR posted after an
	// earlier one changed the key still finds it. When nil, MRLKey names
	// it by its current key.
	MR     any
	MRLKey uint32
	Key    uint32 // key: the key after registration (only the low 8 bits may differ)
	Access Access // access: the rights the registration grants
	// IOVA and Length are the address of the region's first byte and its
	// length (ib_mr.iova and .length, set by ib_map_mr_sg); Length must not
	// exceed what the MR has mapped.
	IOVA   uint64
	Length uint64
}

// RecvWR is a receive work request (struct ibv_recv_wr; a batch is a
// slice rather than a chain of next pointers).
type RecvWR struct {
	WRID   uint64 // wr_id: returned in the WR's completion
	SGList []SGE  // sg_list and num_sge: where the message is placed
}

// DrainWRID is the wr_id of the marker work requests QP.DrainSQ and
// QP.DrainRQ post. Their completions never reach the application's CQ:
// the first flushed completion of the QP with this wr_id and the
// marker's opcode after the marker is armed is the marker's, and is
// taken out. An application WR with this wr_id that is flushed between
// the drain's modify to ERR and its marker gives a completion identical
// to the marker's (same wr_id, opcode, status and QP): the drain may
// take that one and leave the marker's in its place, which no poller
// can tell apart.
const DrainWRID uint64 = 0xD7A1_4ED0_D7A1_4ED0
