package ibv

// Counters is a snapshot of Counters: the same fields, as plain
// values (what verbs.Device.Counters returns; a caller cannot write into
// the live counters through it).
type Counters struct {
	SentPkts            uint64 // sent_pkts
	RcvdPkts            uint64 // rcvd_pkts
	SentBytes           uint64
	RcvdBytes           uint64
	DuplicateRequest    uint64 // duplicate_request
	OutOfSequence       uint64 // out_of_sequence
	RcvdRNRErr          uint64 // rcvd_rnr_err
	SendRNRErr          uint64 // send_rnr_err
	RcvdSeqErr          uint64 // rcvd_seq_err
	AckDeferred         uint64 // ack_deferred
	AnswerJoined        uint64 // read batches whose ACKs waited for the application's answer and left with it
	AnswerMissed        uint64 // read batches whose ACKs waited for an answer that did not come
	PollLeaseExpired    uint64 // times the receive goroutine took the link back from polls that stopped without a block
	PollLeaseStepOffs   uint64 // times the receive goroutine stepped off the link for a busy-polling application (link.SetReadYield)
	RxTurnTimeout       uint64 // read batches delivered before an earlier one, after waiting maxTurnWait (100 ms)
	RetryExceededErr    uint64 // retry_exceeded_err
	RetryRNRExceededErr uint64 // retry_rnr_exceeded_err
	CompleterRetryErr   uint64 // completer_retry_err
	SendErr             uint64 // send_err
	LinkDowned          uint64 // link_downed
	RDMASends           uint64 // rdma_sends
	RDMARecvs           uint64 // rdma_recvs
	ICRCErr             uint64 // bad ICRC, dropped
	ICRCUnverified      uint64 // accepted without an ICRC check (link hid the IP header)
	DropMalformed       uint64 // failed wire.Parse
	DropNoQP            uint64 // no such QP, or wrong class for the QP
	DropState           uint64 // QP not in a state that accepts the packet
	DropAddr            uint64 // source/destination do not match the QP's path
	DropPKey            uint64 // bad_pkey_cntr
	DropQKey            uint64 // qkey_viol_cntr
	DropQueueFull       uint64 // QP inbox full
	DropLength          uint64 // UC/UD length errors, silently dropped
	DropUCMessage       uint64 // UC packets dropped until the next FIRST/ONLY
	DropNoRecvWQE       uint64 // UD datagrams dropped for want of a receive WQE
	DropResponse        uint64 // unexpected or stale responses
	RemoteAccessErr     uint64 // NAKs sent for remote access errors
	InvalidRequestErr   uint64 // NAKs sent for invalid requests
	RemoteOpErr         uint64 // NAKs sent for remote operational errors
	Retransmits         uint64 // go-back-N retries started (each resends from the oldest unacknowledged PSN)
	Timeouts            uint64 // retransmit timer expiries
	Reasked             uint64 // requests sent again alone to re-ask responses found lost (READ runs, atomics)
	EarlyRetries        uint64 // go-back-N retries started two round trips after the last progress, without spending a retry
	HeldRequests        uint64 // requests received beyond the expected PSN and held for the reorder window instead of NAKed at once
	// Congestion control (DCQCN), named as mlx5's counters.
	NPECNMarkedRoCEPackets uint64 // np_ecn_marked_roce_packets: CE-marked packets received
	NPCNPSent              uint64 // np_cnp_sent: CNPs sent for them
	RPCNPHandled           uint64 // rp_cnp_handled: CNPs received that cut a QP's rate
	RPCNPIgnored           uint64 // rp_cnp_ignored: CNPs received for a QP without congestion control, dropped
}
