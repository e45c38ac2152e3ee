package transport

import "github.com/softnic/softnic/ibv"

// Load reads every counter (each with an atomic load; the snapshot as a
// whole is not atomic).
func (c *Counters) Load() ibv.Counters {
	s := ibv.Counters{
		SentPkts:            c.SentPkts.Load(),
		RcvdPkts:            c.RcvdPkts.Load(),
		SentBytes:           c.SentBytes.Load(),
		RcvdBytes:           c.RcvdBytes.Load(),
		DuplicateRequest:    c.DuplicateRequest.Load(),
		OutOfSequence:       c.OutOfSequence.Load(),
		RcvdRNRErr:          c.RcvdRNRErr.Load(),
		SendRNRErr:          c.SendRNRErr.Load(),
		RcvdSeqErr:          c.RcvdSeqErr.Load(),
		AckDeferred:         c.AckDeferred.Load(),
		AnswerJoined:        c.AnswerJoined.Load(),
		AnswerMissed:        c.AnswerMissed.Load(),
		PollLeaseExpired:    c.PollLeaseExpired.Load(),
		PollLeaseStepOffs:   c.PollLeaseStepOffs.Load(),
		RxTurnTimeout:       c.RxTurnTimeout.Load(),
		RetryExceededErr:    c.RetryExceededErr.Load(),
		RetryRNRExceededErr: c.RetryRNRExceededErr.Load(),
		CompleterRetryErr:   c.CompleterRetryErr.Load(),
		SendErr:             c.SendErr.Load(),
		LinkDowned:          c.LinkDowned.Load(),
		RDMASends:           c.RDMASends.Load(),
		RDMARecvs:           c.RDMARecvs.Load(),
		ICRCErr:             c.ICRCErr.Load(),
		ICRCUnverified:      c.ICRCUnverified.Load(),
		DropMalformed:       c.DropMalformed.Load(),
		DropNoQP:            c.DropNoQP.Load(),
		DropState:           c.DropState.Load(),
		DropAddr:            c.DropAddr.Load(),
		DropPKey:            c.DropPKey.Load(),
		DropQKey:            c.DropQKey.Load(),
		DropQueueFull:       c.DropQueueFull.Load(),
		DropLength:          c.DropLength.Load(),
		DropUCMessage:       c.DropUCMessage.Load(),
		DropNoRecvWQE:       c.DropNoRecvWQE.Load(),
		DropResponse:        c.DropResponse.Load(),
		RemoteAccessErr:     c.RemoteAccessErr.Load(),
		InvalidRequestErr:   c.InvalidRequestErr.Load(),
		RemoteOpErr:         c.RemoteOpErr.Load(),
		Retransmits:         c.Retransmits.Load(),
		Timeouts:            c.Timeouts.Load(),
		Reasked:             c.Reasked.Load(),
		EarlyRetries:        c.EarlyRetries.Load(),
		HeldRequests:        c.HeldRequests.Load(),
	}
	s.NPECNMarkedRoCEPackets = c.NPECNMarkedRoCEPackets.Load()
	s.NPCNPSent = c.NPCNPSent.Load()
	s.RPCNPHandled = c.RPCNPHandled.Load()
	s.RPCNPIgnored = c.RPCNPIgnored.Load()
	return s
}
