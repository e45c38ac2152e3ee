package ibv

// WCStatus is a work completion status (enum ibv_wc_status).
type WCStatus uint8

const (
	WCSuccess          WCStatus = iota // IBV_WC_SUCCESS
	WCLocLenErr                        // IBV_WC_LOC_LEN_ERR: a message longer than the receive buffers
	WCLocQPOpErr                       // IBV_WC_LOC_QP_OP_ERR: the WR could not be carried out (a UD message over the MTU, an unroutable peer)
	WCLocEECOpErr                      // IBV_WC_LOC_EEC_OP_ERR
	WCLocProtErr                       // IBV_WC_LOC_PROT_ERR: an SGE outside its MR, or its MR in another PD
	WCWRFlushErr                       // IBV_WC_WR_FLUSH_ERR: flushed because the QP is in ERR
	WCMWBindErr                        // IBV_WC_MW_BIND_ERR
	WCBadRespErr                       // IBV_WC_BAD_RESP_ERR: an unexpected response opcode
	WCLocAccessErr                     // IBV_WC_LOC_ACCESS_ERR: the MR lacks the local rights
	WCRemInvReqErr                     // IBV_WC_REM_INV_REQ_ERR: the peer NAKed the request as invalid
	WCRemAccessErr                     // IBV_WC_REM_ACCESS_ERR: the peer refused the remote access
	WCRemOpErr                         // IBV_WC_REM_OP_ERR: the peer could not complete the request
	WCRetryExcErr                      // IBV_WC_RETRY_EXC_ERR: transport retries exhausted
	WCRNRRetryExcErr                   // IBV_WC_RNR_RETRY_EXC_ERR: RNR retries exhausted
	WCLocRDDViolErr                    // IBV_WC_LOC_RDD_VIOL_ERR
	WCRemInvRDReqErr                   // IBV_WC_REM_INV_RD_REQ_ERR
	WCRemAbortErr                      // IBV_WC_REM_ABORT_ERR
	WCInvEECNErr                       // IBV_WC_INV_EECN_ERR
	WCInvEECStateErr                   // IBV_WC_INV_EEC_STATE_ERR
	WCFatalErr                         // IBV_WC_FATAL_ERR
	WCRespTimeoutErr                   // IBV_WC_RESP_TIMEOUT_ERR
	WCGeneralErr                       // IBV_WC_GENERAL_ERR
	WCTMErr                            // IBV_WC_TM_ERR: a tag-matching operation failed
	WCTMRndvIncomplete                 // IBV_WC_TM_RNDV_INCOMPLETE: a rendezvous message larger than its tagged buffer
)

// WCOpcode is a completion's operation (enum ibv_wc_opcode).
type WCOpcode uint8

const (
	WCSend            WCOpcode = 0   // IBV_WC_SEND
	WCRDMAWrite       WCOpcode = 1   // IBV_WC_RDMA_WRITE
	WCRDMARead        WCOpcode = 2   // IBV_WC_RDMA_READ
	WCCompSwap        WCOpcode = 3   // IBV_WC_COMP_SWAP
	WCFetchAdd        WCOpcode = 4   // IBV_WC_FETCH_ADD
	WCBindMW          WCOpcode = 5   // IBV_WC_BIND_MW
	WCLocalInv        WCOpcode = 6   // IBV_WC_LOCAL_INV
	WCTSO             WCOpcode = 7   // IBV_WC_TSO
	WCFlush           WCOpcode = 8   // IBV_WC_FLUSH
	WCAtomicWrite     WCOpcode = 9   // IBV_WC_ATOMIC_WRITE
	WCRegMR           WCOpcode = 10  // the kernel's IB_WC_REG_MR (libibverbs has none)
	WCRecv            WCOpcode = 128 // IBV_WC_RECV: a SEND arrived
	WCRecvRDMAWithImm WCOpcode = 129 // IBV_WC_RECV_RDMA_WITH_IMM: a WRITE with immediate arrived
)

// WCFlags are a completion's flags (enum ibv_wc_flags).
type WCFlags uint32

const (
	WCGRH         WCFlags = 1 << 0 // IBV_WC_GRH: a UD receive buffer starts with the 40-byte GRH
	WCWithImm     WCFlags = 1 << 1 // IBV_WC_WITH_IMM: Imm holds immediate data
	WCIPCsumOK    WCFlags = 1 << 2 // IBV_WC_IP_CSUM_OK
	WCWithInv     WCFlags = 1 << 3 // IBV_WC_WITH_INV: Imm holds the rkey the SEND invalidated
	WCTMSyncReq   WCFlags = 1 << 4 // IBV_WC_TM_SYNC_REQ
	WCTMMatch     WCFlags = 1 << 5 // IBV_WC_TM_MATCH
	WCTMDataValid WCFlags = 1 << 6 // IBV_WC_TM_DATA_VALID
)

// WorkCompletion is one completion (struct ibv_wc). Only WRID, Status
// and QPNum are meaningful in a completion whose Status is not
// WCSuccess, as ibv_poll_cq(3) says (softnic also fills Opcode).
type WorkCompletion struct {
	WRID      uint64   // wr_id: the completed WR's
	Status    WCStatus // status
	Opcode    WCOpcode // opcode
	VendorErr uint32   // vendor_err: 0
	// ByteLen is byte_len: the bytes a receive placed (a UD receive
	// counts the 40-byte GRH too); in a send-side completion the WR's
	// length, as rxe reports it (rxe_comp.c make_send_cqe).
	ByteLen uint32
	// Imm is imm_data in network order as a value, with WCWithImm; or
	// invalidated_rkey (its union partner) with WCWithInv.
	Imm          uint32
	QPNum        uint32  // qp_num: the local QP (or WQ) the WR was posted to
	SrcQP        uint32  // src_qp: the sending QP of a UD receive
	Flags        WCFlags // wc_flags
	PKeyIndex    uint16  // pkey_index (UD receives)
	SLID         uint16  // slid: 0 on RoCE
	SL           uint8   // sl
	DLIDPathBits uint8   // dlid_path_bits: 0 on RoCE
	// TMTag and TMPriv are struct ibv_wc_tm_info's tag and priv (what
	// ibv_wc_read_tm_info returns): a tag-matching receive's TMH tag and
	// app_ctx.
	TMTag  uint64
	TMPriv uint32
}
