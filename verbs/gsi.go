package verbs

import "github.com/softnic/softnic/wire"

// GSIQKey is the Q_Key of the General Services QP, QP1 (IBTA 13.4.2,
// IB_QP1_QKEY): every MAD to or from QP1 carries it in its DETH.
const GSIQKey = wire.GSIQKey

// CreateGSIQP creates the device's General Services QP: a UD QP whose
// QPN is 1 (the kernel's IB_QPT_GSI, rxe's qp_gsi_index), through which
// the connection manager (package verbs/cm) sends and receives 256-byte
// MADs. attr.Type must be QPTypeUD. Its Q_Key is GSIQKey and cannot be
// changed; a device has at most one (EBUSY while it lives).
//
// Otherwise it is an ordinary UD QP (see QPTypeUD's notes in this
// package): RESET→INIT with QPAttrPKeyIndex, QPAttrPort and QPAttrQKey
// (which must be GSIQKey: any other is EINVAL), INIT→RTR, RTR→RTS with
// QPAttrSQPSN. Every datagram it sends carries Q_Key GSIQKey and source
// QP 1 whatever the WR's RemoteQKey (rxe_req.c init_req_packet), with
// P_Key 0xFFFF, as a UD SEND_ONLY; it receives only datagrams whose Q_Key
// is GSIQKey (others are counted in DropQKey and dropped, rxe_recv.c
// check_keys), each with the GRHLen-byte network header first. It takes
// no SRQ, WQ or TSO (EINVAL). Destroy frees QP number 1 for the next
// CreateGSIQP.
func (pd *PD) CreateGSIQP(attr QPInitAttr) (*QP, error) {
	return pd.createQP(attr, true)
}
