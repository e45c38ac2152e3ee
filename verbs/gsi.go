package verbs

import "syscall"

// GSIQKey is the Q_Key of the General Services QP, QP1 (IBTA 13.4.2,
// IB_QP1_QKEY): every MAD to or from QP1 carries it in its DETH.
const GSIQKey = 0x80010000

// CreateGSIQP creates the device's General Services QP: a UD QP whose
// QPN is 1 (the kernel's IB_QPT_GSI, rxe's qp_gsi_index), through which
// the connection manager (package verbs/cm) sends and receives 256-byte
// MADs. attr.Type must be QPTypeUD. Its Q_Key is GSIQKey and cannot be
// changed; a device has at most one (EBUSY while it lives).
//
// SKELETON: the GSI helper implements it.
func (pd *PD) CreateGSIQP(attr QPInitAttr) (*QP, error) {
	return nil, syscall.ENOSYS
}
