// The CM message views: one field table per message, transcribed from the
// kernel's include/rdma/ibta_vol1_c12.h, and one accessor pair per field.

package wire

// reqLayout is ibta_vol1_c12.h's Table 106 REQ Message Contents (IBTA Vol 1
// section 12.6): byte offsets after the MAD header, bit offsets from the MSB.
var reqLayout = []CMField{
	{"LocalCommID", 0, 0, 32},
	{"VendorID", 5, 0, 24},
	{"ServiceID", 8, 0, 64},
	{"LocalCAGUID", 16, 0, 64},
	{"LocalQKey", 28, 0, 32},
	{"LocalQPN", 32, 0, 24},
	{"ResponderResources", 35, 0, 8},
	{"LocalEECN", 36, 0, 24},
	{"InitiatorDepth", 39, 0, 8},
	{"RemoteEECN", 40, 0, 24},
	{"RemoteCMResponseTimeout", 43, 0, 5},
	{"TransportServiceType", 43, 5, 2},
	{"EndToEndFlowControl", 43, 7, 1},
	{"StartingPSN", 44, 0, 24},
	{"LocalCMResponseTimeout", 47, 0, 5},
	{"RetryCount", 47, 5, 3},
	{"PartitionKey", 48, 0, 16},
	{"PathMTU", 50, 0, 4},
	{"RDCExists", 50, 4, 1},
	{"RNRRetryCount", 50, 5, 3},
	{"MaxCMRetries", 51, 0, 4},
	{"SRQ", 51, 4, 1},
	{"ExtendedTransportType", 51, 5, 3},
	{"PrimaryLocalPortLID", 52, 0, 16},
	{"PrimaryRemotePortLID", 54, 0, 16},
	{"PrimaryLocalPortGID", 56, 0, 128},
	{"PrimaryRemotePortGID", 72, 0, 128},
	{"PrimaryFlowLabel", 88, 0, 20},
	{"PrimaryPacketRate", 91, 2, 6},
	{"PrimaryTrafficClass", 92, 0, 8},
	{"PrimaryHopLimit", 93, 0, 8},
	{"PrimarySL", 94, 0, 4},
	{"PrimarySubnetLocal", 94, 4, 1},
	{"PrimaryLocalACKTimeout", 95, 0, 5},
	{"AlternateLocalPortLID", 96, 0, 16},
	{"AlternateRemotePortLID", 98, 0, 16},
	{"AlternateLocalPortGID", 100, 0, 128},
	{"AlternateRemotePortGID", 116, 0, 128},
	{"AlternateFlowLabel", 132, 0, 20},
	{"AlternatePacketRate", 135, 2, 6},
	{"AlternateTrafficClass", 136, 0, 8},
	{"AlternateHopLimit", 137, 0, 8},
	{"AlternateSL", 138, 0, 4},
	{"AlternateSubnetLocal", 138, 4, 1},
	{"AlternateLocalACKTimeout", 139, 0, 5},
	{"SAPSupported", 139, 5, 1},
	{"PrivateData", 140, 0, 736},
}

// CMReq is a view of a CM REQ MAD (attribute CMAttrREQ): each field F
// of reqLayout has a getter F and a setter SetF (numbers masked to the
// field's width, byte strings cut or zero-filled to its length).
type CMReq MAD

// ParseCMReq returns the REQ at the start of b: ParseCM's checks and attribute CMAttrREQ.
func ParseCMReq(b []byte) (CMReq, error) { m, err := parseCMAttr(b, CMAttrREQ); return CMReq(m), err }

// MAD returns the MAD view of m.
func (m CMReq) MAD() MAD                            { return MAD(m) }
func (m CMReq) LocalCommID() uint32                 { return uint32(reqLayout[0].get(m)) }
func (m CMReq) SetLocalCommID(v uint32)             { reqLayout[0].set(m, uint64(v)) }
func (m CMReq) VendorID() uint32                    { return uint32(reqLayout[1].get(m)) }
func (m CMReq) SetVendorID(v uint32)                { reqLayout[1].set(m, uint64(v)) }
func (m CMReq) ServiceID() uint64                   { return uint64(reqLayout[2].get(m)) }
func (m CMReq) SetServiceID(v uint64)               { reqLayout[2].set(m, uint64(v)) }
func (m CMReq) LocalCAGUID() uint64                 { return uint64(reqLayout[3].get(m)) }
func (m CMReq) SetLocalCAGUID(v uint64)             { reqLayout[3].set(m, uint64(v)) }
func (m CMReq) LocalQKey() uint32                   { return uint32(reqLayout[4].get(m)) }
func (m CMReq) SetLocalQKey(v uint32)               { reqLayout[4].set(m, uint64(v)) }
func (m CMReq) LocalQPN() uint32                    { return uint32(reqLayout[5].get(m)) }
func (m CMReq) SetLocalQPN(v uint32)                { reqLayout[5].set(m, uint64(v)) }
func (m CMReq) ResponderResources() uint8           { return uint8(reqLayout[6].get(m)) }
func (m CMReq) SetResponderResources(v uint8)       { reqLayout[6].set(m, uint64(v)) }
func (m CMReq) LocalEECN() uint32                   { return uint32(reqLayout[7].get(m)) }
func (m CMReq) SetLocalEECN(v uint32)               { reqLayout[7].set(m, uint64(v)) }
func (m CMReq) InitiatorDepth() uint8               { return uint8(reqLayout[8].get(m)) }
func (m CMReq) SetInitiatorDepth(v uint8)           { reqLayout[8].set(m, uint64(v)) }
func (m CMReq) RemoteEECN() uint32                  { return uint32(reqLayout[9].get(m)) }
func (m CMReq) SetRemoteEECN(v uint32)              { reqLayout[9].set(m, uint64(v)) }
func (m CMReq) RemoteCMResponseTimeout() uint8      { return uint8(reqLayout[10].get(m)) }
func (m CMReq) SetRemoteCMResponseTimeout(v uint8)  { reqLayout[10].set(m, uint64(v)) }
func (m CMReq) TransportServiceType() uint8         { return uint8(reqLayout[11].get(m)) }
func (m CMReq) SetTransportServiceType(v uint8)     { reqLayout[11].set(m, uint64(v)) }
func (m CMReq) EndToEndFlowControl() bool           { return reqLayout[12].get(m) != 0 }
func (m CMReq) SetEndToEndFlowControl(v bool)       { reqLayout[12].set(m, b2u(v)) }
func (m CMReq) StartingPSN() uint32                 { return uint32(reqLayout[13].get(m)) }
func (m CMReq) SetStartingPSN(v uint32)             { reqLayout[13].set(m, uint64(v)) }
func (m CMReq) LocalCMResponseTimeout() uint8       { return uint8(reqLayout[14].get(m)) }
func (m CMReq) SetLocalCMResponseTimeout(v uint8)   { reqLayout[14].set(m, uint64(v)) }
func (m CMReq) RetryCount() uint8                   { return uint8(reqLayout[15].get(m)) }
func (m CMReq) SetRetryCount(v uint8)               { reqLayout[15].set(m, uint64(v)) }
func (m CMReq) PartitionKey() uint16                { return uint16(reqLayout[16].get(m)) }
func (m CMReq) SetPartitionKey(v uint16)            { reqLayout[16].set(m, uint64(v)) }
func (m CMReq) PathMTU() uint8                      { return uint8(reqLayout[17].get(m)) }
func (m CMReq) SetPathMTU(v uint8)                  { reqLayout[17].set(m, uint64(v)) }
func (m CMReq) RDCExists() bool                     { return reqLayout[18].get(m) != 0 }
func (m CMReq) SetRDCExists(v bool)                 { reqLayout[18].set(m, b2u(v)) }
func (m CMReq) RNRRetryCount() uint8                { return uint8(reqLayout[19].get(m)) }
func (m CMReq) SetRNRRetryCount(v uint8)            { reqLayout[19].set(m, uint64(v)) }
func (m CMReq) MaxCMRetries() uint8                 { return uint8(reqLayout[20].get(m)) }
func (m CMReq) SetMaxCMRetries(v uint8)             { reqLayout[20].set(m, uint64(v)) }
func (m CMReq) SRQ() bool                           { return reqLayout[21].get(m) != 0 }
func (m CMReq) SetSRQ(v bool)                       { reqLayout[21].set(m, b2u(v)) }
func (m CMReq) ExtendedTransportType() uint8        { return uint8(reqLayout[22].get(m)) }
func (m CMReq) SetExtendedTransportType(v uint8)    { reqLayout[22].set(m, uint64(v)) }
func (m CMReq) PrimaryLocalPortLID() uint16         { return uint16(reqLayout[23].get(m)) }
func (m CMReq) SetPrimaryLocalPortLID(v uint16)     { reqLayout[23].set(m, uint64(v)) }
func (m CMReq) PrimaryRemotePortLID() uint16        { return uint16(reqLayout[24].get(m)) }
func (m CMReq) SetPrimaryRemotePortLID(v uint16)    { reqLayout[24].set(m, uint64(v)) }
func (m CMReq) PrimaryLocalPortGID() []byte         { return reqLayout[25].bytes(m) }
func (m CMReq) SetPrimaryLocalPortGID(v []byte)     { reqLayout[25].putBytes(m, v) }
func (m CMReq) PrimaryRemotePortGID() []byte        { return reqLayout[26].bytes(m) }
func (m CMReq) SetPrimaryRemotePortGID(v []byte)    { reqLayout[26].putBytes(m, v) }
func (m CMReq) PrimaryFlowLabel() uint32            { return uint32(reqLayout[27].get(m)) }
func (m CMReq) SetPrimaryFlowLabel(v uint32)        { reqLayout[27].set(m, uint64(v)) }
func (m CMReq) PrimaryPacketRate() uint8            { return uint8(reqLayout[28].get(m)) }
func (m CMReq) SetPrimaryPacketRate(v uint8)        { reqLayout[28].set(m, uint64(v)) }
func (m CMReq) PrimaryTrafficClass() uint8          { return uint8(reqLayout[29].get(m)) }
func (m CMReq) SetPrimaryTrafficClass(v uint8)      { reqLayout[29].set(m, uint64(v)) }
func (m CMReq) PrimaryHopLimit() uint8              { return uint8(reqLayout[30].get(m)) }
func (m CMReq) SetPrimaryHopLimit(v uint8)          { reqLayout[30].set(m, uint64(v)) }
func (m CMReq) PrimarySL() uint8                    { return uint8(reqLayout[31].get(m)) }
func (m CMReq) SetPrimarySL(v uint8)                { reqLayout[31].set(m, uint64(v)) }
func (m CMReq) PrimarySubnetLocal() bool            { return reqLayout[32].get(m) != 0 }
func (m CMReq) SetPrimarySubnetLocal(v bool)        { reqLayout[32].set(m, b2u(v)) }
func (m CMReq) PrimaryLocalACKTimeout() uint8       { return uint8(reqLayout[33].get(m)) }
func (m CMReq) SetPrimaryLocalACKTimeout(v uint8)   { reqLayout[33].set(m, uint64(v)) }
func (m CMReq) AlternateLocalPortLID() uint16       { return uint16(reqLayout[34].get(m)) }
func (m CMReq) SetAlternateLocalPortLID(v uint16)   { reqLayout[34].set(m, uint64(v)) }
func (m CMReq) AlternateRemotePortLID() uint16      { return uint16(reqLayout[35].get(m)) }
func (m CMReq) SetAlternateRemotePortLID(v uint16)  { reqLayout[35].set(m, uint64(v)) }
func (m CMReq) AlternateLocalPortGID() []byte       { return reqLayout[36].bytes(m) }
func (m CMReq) SetAlternateLocalPortGID(v []byte)   { reqLayout[36].putBytes(m, v) }
func (m CMReq) AlternateRemotePortGID() []byte      { return reqLayout[37].bytes(m) }
func (m CMReq) SetAlternateRemotePortGID(v []byte)  { reqLayout[37].putBytes(m, v) }
func (m CMReq) AlternateFlowLabel() uint32          { return uint32(reqLayout[38].get(m)) }
func (m CMReq) SetAlternateFlowLabel(v uint32)      { reqLayout[38].set(m, uint64(v)) }
func (m CMReq) AlternatePacketRate() uint8          { return uint8(reqLayout[39].get(m)) }
func (m CMReq) SetAlternatePacketRate(v uint8)      { reqLayout[39].set(m, uint64(v)) }
func (m CMReq) AlternateTrafficClass() uint8        { return uint8(reqLayout[40].get(m)) }
func (m CMReq) SetAlternateTrafficClass(v uint8)    { reqLayout[40].set(m, uint64(v)) }
func (m CMReq) AlternateHopLimit() uint8            { return uint8(reqLayout[41].get(m)) }
func (m CMReq) SetAlternateHopLimit(v uint8)        { reqLayout[41].set(m, uint64(v)) }
func (m CMReq) AlternateSL() uint8                  { return uint8(reqLayout[42].get(m)) }
func (m CMReq) SetAlternateSL(v uint8)              { reqLayout[42].set(m, uint64(v)) }
func (m CMReq) AlternateSubnetLocal() bool          { return reqLayout[43].get(m) != 0 }
func (m CMReq) SetAlternateSubnetLocal(v bool)      { reqLayout[43].set(m, b2u(v)) }
func (m CMReq) AlternateLocalACKTimeout() uint8     { return uint8(reqLayout[44].get(m)) }
func (m CMReq) SetAlternateLocalACKTimeout(v uint8) { reqLayout[44].set(m, uint64(v)) }
func (m CMReq) SAPSupported() bool                  { return reqLayout[45].get(m) != 0 }
func (m CMReq) SetSAPSupported(v bool)              { reqLayout[45].set(m, b2u(v)) }
func (m CMReq) PrivateData() []byte                 { return reqLayout[46].bytes(m) }
func (m CMReq) SetPrivateData(v []byte)             { reqLayout[46].putBytes(m, v) }

// mraLayout is ibta_vol1_c12.h's Table 107 MRA Message Contents (IBTA Vol 1
// section 12.6): byte offsets after the MAD header, bit offsets from the MSB.
var mraLayout = []CMField{
	{"LocalCommID", 0, 0, 32},
	{"RemoteCommID", 4, 0, 32},
	{"MessageMRAed", 8, 0, 2},
	{"ServiceTimeout", 9, 0, 5},
	{"PrivateData", 10, 0, 1776},
}

// CMMRA is a view of a CM MRA MAD (attribute CMAttrMRA): each field F
// of mraLayout has a getter F and a setter SetF (numbers masked to the
// field's width, byte strings cut or zero-filled to its length).
type CMMRA MAD

// ParseCMMRA returns the MRA at the start of b: ParseCM's checks and attribute CMAttrMRA.
func ParseCMMRA(b []byte) (CMMRA, error) { m, err := parseCMAttr(b, CMAttrMRA); return CMMRA(m), err }

// MAD returns the MAD view of m.
func (m CMMRA) MAD() MAD                  { return MAD(m) }
func (m CMMRA) LocalCommID() uint32       { return uint32(mraLayout[0].get(m)) }
func (m CMMRA) SetLocalCommID(v uint32)   { mraLayout[0].set(m, uint64(v)) }
func (m CMMRA) RemoteCommID() uint32      { return uint32(mraLayout[1].get(m)) }
func (m CMMRA) SetRemoteCommID(v uint32)  { mraLayout[1].set(m, uint64(v)) }
func (m CMMRA) MessageMRAed() uint8       { return uint8(mraLayout[2].get(m)) }
func (m CMMRA) SetMessageMRAed(v uint8)   { mraLayout[2].set(m, uint64(v)) }
func (m CMMRA) ServiceTimeout() uint8     { return uint8(mraLayout[3].get(m)) }
func (m CMMRA) SetServiceTimeout(v uint8) { mraLayout[3].set(m, uint64(v)) }
func (m CMMRA) PrivateData() []byte       { return mraLayout[4].bytes(m) }
func (m CMMRA) SetPrivateData(v []byte)   { mraLayout[4].putBytes(m, v) }

// rejLayout is ibta_vol1_c12.h's Table 108 REJ Message Contents (IBTA Vol 1
// section 12.6): byte offsets after the MAD header, bit offsets from the MSB.
var rejLayout = []CMField{
	{"LocalCommID", 0, 0, 32},
	{"RemoteCommID", 4, 0, 32},
	{"MessageRejected", 8, 0, 2},
	{"RejectedInfoLength", 9, 0, 7},
	{"Reason", 10, 0, 16},
	{"ARI", 12, 0, 576},
	{"PrivateData", 84, 0, 1184},
}

// CMRej is a view of a CM REJ MAD (attribute CMAttrREJ): each field F
// of rejLayout has a getter F and a setter SetF (numbers masked to the
// field's width, byte strings cut or zero-filled to its length).
type CMRej MAD

// ParseCMRej returns the REJ at the start of b: ParseCM's checks and attribute CMAttrREJ.
func ParseCMRej(b []byte) (CMRej, error) { m, err := parseCMAttr(b, CMAttrREJ); return CMRej(m), err }

// MAD returns the MAD view of m.
func (m CMRej) MAD() MAD                      { return MAD(m) }
func (m CMRej) LocalCommID() uint32           { return uint32(rejLayout[0].get(m)) }
func (m CMRej) SetLocalCommID(v uint32)       { rejLayout[0].set(m, uint64(v)) }
func (m CMRej) RemoteCommID() uint32          { return uint32(rejLayout[1].get(m)) }
func (m CMRej) SetRemoteCommID(v uint32)      { rejLayout[1].set(m, uint64(v)) }
func (m CMRej) MessageRejected() uint8        { return uint8(rejLayout[2].get(m)) }
func (m CMRej) SetMessageRejected(v uint8)    { rejLayout[2].set(m, uint64(v)) }
func (m CMRej) RejectedInfoLength() uint8     { return uint8(rejLayout[3].get(m)) }
func (m CMRej) SetRejectedInfoLength(v uint8) { rejLayout[3].set(m, uint64(v)) }
func (m CMRej) Reason() uint16                { return uint16(rejLayout[4].get(m)) }
func (m CMRej) SetReason(v uint16)            { rejLayout[4].set(m, uint64(v)) }
func (m CMRej) ARI() []byte                   { return rejLayout[5].bytes(m) }
func (m CMRej) SetARI(v []byte)               { rejLayout[5].putBytes(m, v) }
func (m CMRej) PrivateData() []byte           { return rejLayout[6].bytes(m) }
func (m CMRej) SetPrivateData(v []byte)       { rejLayout[6].putBytes(m, v) }

// repLayout is ibta_vol1_c12.h's Table 110 REP Message Contents (IBTA Vol 1
// section 12.6): byte offsets after the MAD header, bit offsets from the MSB.
var repLayout = []CMField{
	{"LocalCommID", 0, 0, 32},
	{"RemoteCommID", 4, 0, 32},
	{"LocalQKey", 8, 0, 32},
	{"LocalQPN", 12, 0, 24},
	{"VendorIDH", 15, 0, 8},
	{"LocalEECN", 16, 0, 24},
	{"VendorIDM", 19, 0, 8},
	{"StartingPSN", 20, 0, 24},
	{"VendorIDL", 23, 0, 8},
	{"ResponderResources", 24, 0, 8},
	{"InitiatorDepth", 25, 0, 8},
	{"TargetACKDelay", 26, 0, 5},
	{"FailoverAccepted", 26, 5, 2},
	{"EndToEndFlowControl", 26, 7, 1},
	{"RNRRetryCount", 27, 0, 3},
	{"SRQ", 27, 3, 1},
	{"LocalCAGUID", 28, 0, 64},
	{"PrivateData", 36, 0, 1568},
}

// CMRep is a view of a CM REP MAD (attribute CMAttrREP): each field F
// of repLayout has a getter F and a setter SetF (numbers masked to the
// field's width, byte strings cut or zero-filled to its length).
type CMRep MAD

// ParseCMRep returns the REP at the start of b: ParseCM's checks and attribute CMAttrREP.
func ParseCMRep(b []byte) (CMRep, error) { m, err := parseCMAttr(b, CMAttrREP); return CMRep(m), err }

// MAD returns the MAD view of m.
func (m CMRep) MAD() MAD                      { return MAD(m) }
func (m CMRep) LocalCommID() uint32           { return uint32(repLayout[0].get(m)) }
func (m CMRep) SetLocalCommID(v uint32)       { repLayout[0].set(m, uint64(v)) }
func (m CMRep) RemoteCommID() uint32          { return uint32(repLayout[1].get(m)) }
func (m CMRep) SetRemoteCommID(v uint32)      { repLayout[1].set(m, uint64(v)) }
func (m CMRep) LocalQKey() uint32             { return uint32(repLayout[2].get(m)) }
func (m CMRep) SetLocalQKey(v uint32)         { repLayout[2].set(m, uint64(v)) }
func (m CMRep) LocalQPN() uint32              { return uint32(repLayout[3].get(m)) }
func (m CMRep) SetLocalQPN(v uint32)          { repLayout[3].set(m, uint64(v)) }
func (m CMRep) VendorIDH() uint8              { return uint8(repLayout[4].get(m)) }
func (m CMRep) SetVendorIDH(v uint8)          { repLayout[4].set(m, uint64(v)) }
func (m CMRep) LocalEECN() uint32             { return uint32(repLayout[5].get(m)) }
func (m CMRep) SetLocalEECN(v uint32)         { repLayout[5].set(m, uint64(v)) }
func (m CMRep) VendorIDM() uint8              { return uint8(repLayout[6].get(m)) }
func (m CMRep) SetVendorIDM(v uint8)          { repLayout[6].set(m, uint64(v)) }
func (m CMRep) StartingPSN() uint32           { return uint32(repLayout[7].get(m)) }
func (m CMRep) SetStartingPSN(v uint32)       { repLayout[7].set(m, uint64(v)) }
func (m CMRep) VendorIDL() uint8              { return uint8(repLayout[8].get(m)) }
func (m CMRep) SetVendorIDL(v uint8)          { repLayout[8].set(m, uint64(v)) }
func (m CMRep) ResponderResources() uint8     { return uint8(repLayout[9].get(m)) }
func (m CMRep) SetResponderResources(v uint8) { repLayout[9].set(m, uint64(v)) }
func (m CMRep) InitiatorDepth() uint8         { return uint8(repLayout[10].get(m)) }
func (m CMRep) SetInitiatorDepth(v uint8)     { repLayout[10].set(m, uint64(v)) }
func (m CMRep) TargetACKDelay() uint8         { return uint8(repLayout[11].get(m)) }
func (m CMRep) SetTargetACKDelay(v uint8)     { repLayout[11].set(m, uint64(v)) }
func (m CMRep) FailoverAccepted() uint8       { return uint8(repLayout[12].get(m)) }
func (m CMRep) SetFailoverAccepted(v uint8)   { repLayout[12].set(m, uint64(v)) }
func (m CMRep) EndToEndFlowControl() bool     { return repLayout[13].get(m) != 0 }
func (m CMRep) SetEndToEndFlowControl(v bool) { repLayout[13].set(m, b2u(v)) }
func (m CMRep) RNRRetryCount() uint8          { return uint8(repLayout[14].get(m)) }
func (m CMRep) SetRNRRetryCount(v uint8)      { repLayout[14].set(m, uint64(v)) }
func (m CMRep) SRQ() bool                     { return repLayout[15].get(m) != 0 }
func (m CMRep) SetSRQ(v bool)                 { repLayout[15].set(m, b2u(v)) }
func (m CMRep) LocalCAGUID() uint64           { return uint64(repLayout[16].get(m)) }
func (m CMRep) SetLocalCAGUID(v uint64)       { repLayout[16].set(m, uint64(v)) }
func (m CMRep) PrivateData() []byte           { return repLayout[17].bytes(m) }
func (m CMRep) SetPrivateData(v []byte)       { repLayout[17].putBytes(m, v) }

// rtuLayout is ibta_vol1_c12.h's Table 111 RTU Message Contents (IBTA Vol 1
// section 12.6): byte offsets after the MAD header, bit offsets from the MSB.
var rtuLayout = []CMField{
	{"LocalCommID", 0, 0, 32},
	{"RemoteCommID", 4, 0, 32},
	{"PrivateData", 8, 0, 1792},
}

// CMRtu is a view of a CM RTU MAD (attribute CMAttrRTU): each field F
// of rtuLayout has a getter F and a setter SetF (numbers masked to the
// field's width, byte strings cut or zero-filled to its length).
type CMRtu MAD

// ParseCMRtu returns the RTU at the start of b: ParseCM's checks and attribute CMAttrRTU.
func ParseCMRtu(b []byte) (CMRtu, error) { m, err := parseCMAttr(b, CMAttrRTU); return CMRtu(m), err }

// MAD returns the MAD view of m.
func (m CMRtu) MAD() MAD                 { return MAD(m) }
func (m CMRtu) LocalCommID() uint32      { return uint32(rtuLayout[0].get(m)) }
func (m CMRtu) SetLocalCommID(v uint32)  { rtuLayout[0].set(m, uint64(v)) }
func (m CMRtu) RemoteCommID() uint32     { return uint32(rtuLayout[1].get(m)) }
func (m CMRtu) SetRemoteCommID(v uint32) { rtuLayout[1].set(m, uint64(v)) }
func (m CMRtu) PrivateData() []byte      { return rtuLayout[2].bytes(m) }
func (m CMRtu) SetPrivateData(v []byte)  { rtuLayout[2].putBytes(m, v) }

// dreqLayout is ibta_vol1_c12.h's Table 112 DREQ Message Contents (IBTA Vol 1
// section 12.6): byte offsets after the MAD header, bit offsets from the MSB.
var dreqLayout = []CMField{
	{"LocalCommID", 0, 0, 32},
	{"RemoteCommID", 4, 0, 32},
	{"RemoteQPN", 8, 0, 24},
	{"PrivateData", 12, 0, 1760},
}

// CMDreq is a view of a CM DREQ MAD (attribute CMAttrDREQ): each field F
// of dreqLayout has a getter F and a setter SetF (numbers masked to the
// field's width, byte strings cut or zero-filled to its length).
type CMDreq MAD

// ParseCMDreq returns the DREQ at the start of b: ParseCM's checks and attribute CMAttrDREQ.
func ParseCMDreq(b []byte) (CMDreq, error) {
	m, err := parseCMAttr(b, CMAttrDREQ)
	return CMDreq(m), err
}

// MAD returns the MAD view of m.
func (m CMDreq) MAD() MAD                 { return MAD(m) }
func (m CMDreq) LocalCommID() uint32      { return uint32(dreqLayout[0].get(m)) }
func (m CMDreq) SetLocalCommID(v uint32)  { dreqLayout[0].set(m, uint64(v)) }
func (m CMDreq) RemoteCommID() uint32     { return uint32(dreqLayout[1].get(m)) }
func (m CMDreq) SetRemoteCommID(v uint32) { dreqLayout[1].set(m, uint64(v)) }
func (m CMDreq) RemoteQPN() uint32        { return uint32(dreqLayout[2].get(m)) }
func (m CMDreq) SetRemoteQPN(v uint32)    { dreqLayout[2].set(m, uint64(v)) }
func (m CMDreq) PrivateData() []byte      { return dreqLayout[3].bytes(m) }
func (m CMDreq) SetPrivateData(v []byte)  { dreqLayout[3].putBytes(m, v) }

// drepLayout is ibta_vol1_c12.h's Table 113 DREP Message Contents (IBTA Vol 1
// section 12.6): byte offsets after the MAD header, bit offsets from the MSB.
var drepLayout = []CMField{
	{"LocalCommID", 0, 0, 32},
	{"RemoteCommID", 4, 0, 32},
	{"PrivateData", 8, 0, 1792},
}

// CMDrep is a view of a CM DREP MAD (attribute CMAttrDREP): each field F
// of drepLayout has a getter F and a setter SetF (numbers masked to the
// field's width, byte strings cut or zero-filled to its length).
type CMDrep MAD

// ParseCMDrep returns the DREP at the start of b: ParseCM's checks and attribute CMAttrDREP.
func ParseCMDrep(b []byte) (CMDrep, error) {
	m, err := parseCMAttr(b, CMAttrDREP)
	return CMDrep(m), err
}

// MAD returns the MAD view of m.
func (m CMDrep) MAD() MAD                 { return MAD(m) }
func (m CMDrep) LocalCommID() uint32      { return uint32(drepLayout[0].get(m)) }
func (m CMDrep) SetLocalCommID(v uint32)  { drepLayout[0].set(m, uint64(v)) }
func (m CMDrep) RemoteCommID() uint32     { return uint32(drepLayout[1].get(m)) }
func (m CMDrep) SetRemoteCommID(v uint32) { drepLayout[1].set(m, uint64(v)) }
func (m CMDrep) PrivateData() []byte      { return drepLayout[2].bytes(m) }
func (m CMDrep) SetPrivateData(v []byte)  { drepLayout[2].putBytes(m, v) }

// sidrreqLayout is ibta_vol1_c12.h's Table 119 SIDR_REQ Message Contents (IBTA Vol 1
// section 12.6): byte offsets after the MAD header, bit offsets from the MSB.
var sidrreqLayout = []CMField{
	{"RequestID", 0, 0, 32},
	{"PartitionKey", 4, 0, 16},
	{"ServiceID", 8, 0, 64},
	{"PrivateData", 16, 0, 1728},
}

// CMSIDRReq is a view of a CM SIDR_REQ MAD (attribute CMAttrSIDRREQ): each field F
// of sidrreqLayout has a getter F and a setter SetF (numbers masked to the
// field's width, byte strings cut or zero-filled to its length).
type CMSIDRReq MAD

// ParseCMSIDRReq returns the SIDR_REQ at the start of b: ParseCM's checks and attribute CMAttrSIDRREQ.
func ParseCMSIDRReq(b []byte) (CMSIDRReq, error) {
	m, err := parseCMAttr(b, CMAttrSIDRREQ)
	return CMSIDRReq(m), err
}

// MAD returns the MAD view of m.
func (m CMSIDRReq) MAD() MAD                 { return MAD(m) }
func (m CMSIDRReq) RequestID() uint32        { return uint32(sidrreqLayout[0].get(m)) }
func (m CMSIDRReq) SetRequestID(v uint32)    { sidrreqLayout[0].set(m, uint64(v)) }
func (m CMSIDRReq) PartitionKey() uint16     { return uint16(sidrreqLayout[1].get(m)) }
func (m CMSIDRReq) SetPartitionKey(v uint16) { sidrreqLayout[1].set(m, uint64(v)) }
func (m CMSIDRReq) ServiceID() uint64        { return uint64(sidrreqLayout[2].get(m)) }
func (m CMSIDRReq) SetServiceID(v uint64)    { sidrreqLayout[2].set(m, uint64(v)) }
func (m CMSIDRReq) PrivateData() []byte      { return sidrreqLayout[3].bytes(m) }
func (m CMSIDRReq) SetPrivateData(v []byte)  { sidrreqLayout[3].putBytes(m, v) }

// sidrrepLayout is ibta_vol1_c12.h's Table 120 SIDR_REP Message Contents (IBTA Vol 1
// section 12.6): byte offsets after the MAD header, bit offsets from the MSB.
var sidrrepLayout = []CMField{
	{"RequestID", 0, 0, 32},
	{"Status", 4, 0, 8},
	{"AdditionalInfoLength", 5, 0, 8},
	{"VendorIDH", 6, 0, 16},
	{"QPN", 8, 0, 24},
	{"VendorIDL", 11, 0, 8},
	{"ServiceID", 12, 0, 64},
	{"QKey", 20, 0, 32},
	{"AdditionalInfo", 24, 0, 576},
	{"PrivateData", 96, 0, 1088},
}

// CMSIDRRep is a view of a CM SIDR_REP MAD (attribute CMAttrSIDRREP): each field F
// of sidrrepLayout has a getter F and a setter SetF (numbers masked to the
// field's width, byte strings cut or zero-filled to its length).
type CMSIDRRep MAD

// ParseCMSIDRRep returns the SIDR_REP at the start of b: ParseCM's checks and attribute CMAttrSIDRREP.
func ParseCMSIDRRep(b []byte) (CMSIDRRep, error) {
	m, err := parseCMAttr(b, CMAttrSIDRREP)
	return CMSIDRRep(m), err
}

// MAD returns the MAD view of m.
func (m CMSIDRRep) MAD() MAD                        { return MAD(m) }
func (m CMSIDRRep) RequestID() uint32               { return uint32(sidrrepLayout[0].get(m)) }
func (m CMSIDRRep) SetRequestID(v uint32)           { sidrrepLayout[0].set(m, uint64(v)) }
func (m CMSIDRRep) Status() uint8                   { return uint8(sidrrepLayout[1].get(m)) }
func (m CMSIDRRep) SetStatus(v uint8)               { sidrrepLayout[1].set(m, uint64(v)) }
func (m CMSIDRRep) AdditionalInfoLength() uint8     { return uint8(sidrrepLayout[2].get(m)) }
func (m CMSIDRRep) SetAdditionalInfoLength(v uint8) { sidrrepLayout[2].set(m, uint64(v)) }
func (m CMSIDRRep) VendorIDH() uint16               { return uint16(sidrrepLayout[3].get(m)) }
func (m CMSIDRRep) SetVendorIDH(v uint16)           { sidrrepLayout[3].set(m, uint64(v)) }
func (m CMSIDRRep) QPN() uint32                     { return uint32(sidrrepLayout[4].get(m)) }
func (m CMSIDRRep) SetQPN(v uint32)                 { sidrrepLayout[4].set(m, uint64(v)) }
func (m CMSIDRRep) VendorIDL() uint8                { return uint8(sidrrepLayout[5].get(m)) }
func (m CMSIDRRep) SetVendorIDL(v uint8)            { sidrrepLayout[5].set(m, uint64(v)) }
func (m CMSIDRRep) ServiceID() uint64               { return uint64(sidrrepLayout[6].get(m)) }
func (m CMSIDRRep) SetServiceID(v uint64)           { sidrrepLayout[6].set(m, uint64(v)) }
func (m CMSIDRRep) QKey() uint32                    { return uint32(sidrrepLayout[7].get(m)) }
func (m CMSIDRRep) SetQKey(v uint32)                { sidrrepLayout[7].set(m, uint64(v)) }
func (m CMSIDRRep) AdditionalInfo() []byte          { return sidrrepLayout[8].bytes(m) }
func (m CMSIDRRep) SetAdditionalInfo(v []byte)      { sidrrepLayout[8].putBytes(m, v) }
func (m CMSIDRRep) PrivateData() []byte             { return sidrrepLayout[9].bytes(m) }
func (m CMSIDRRep) SetPrivateData(v []byte)         { sidrrepLayout[9].putBytes(m, v) }

// lapLayout is ibta_vol1_c12.h's Table 115 LAP Message Contents (IBTA Vol 1
// section 12.6): byte offsets after the MAD header, bit offsets from the MSB.
var lapLayout = []CMField{
	{"LocalCommID", 0, 0, 32},
	{"RemoteCommID", 4, 0, 32},
	{"RemoteQPN", 12, 0, 24},
	{"RemoteCMResponseTimeout", 15, 0, 5},
	{"AlternateLocalPortLID", 20, 0, 16},
	{"AlternateRemotePortLID", 22, 0, 16},
	{"AlternateLocalPortGID", 24, 0, 128},
	{"AlternateRemotePortGID", 40, 0, 128},
	{"AlternateFlowLabel", 56, 0, 20},
	{"AlternateTrafficClass", 59, 0, 8},
	{"AlternateHopLimit", 60, 0, 8},
	{"AlternatePacketRate", 61, 2, 6},
	{"AlternateSL", 62, 0, 4},
	{"AlternateSubnetLocal", 62, 4, 1},
	{"AlternateLocalACKTimeout", 63, 0, 5},
	{"PrivateData", 64, 0, 1344},
}

// CMLap is a view of a CM LAP MAD (attribute CMAttrLAP): each field F
// of lapLayout has a getter F and a setter SetF (numbers masked to the
// field's width, byte strings cut or zero-filled to its length).
type CMLap MAD

// ParseCMLap returns the LAP at the start of b: ParseCM's checks and attribute CMAttrLAP.
func ParseCMLap(b []byte) (CMLap, error) { m, err := parseCMAttr(b, CMAttrLAP); return CMLap(m), err }

// MAD returns the MAD view of m.
func (m CMLap) MAD() MAD                            { return MAD(m) }
func (m CMLap) LocalCommID() uint32                 { return uint32(lapLayout[0].get(m)) }
func (m CMLap) SetLocalCommID(v uint32)             { lapLayout[0].set(m, uint64(v)) }
func (m CMLap) RemoteCommID() uint32                { return uint32(lapLayout[1].get(m)) }
func (m CMLap) SetRemoteCommID(v uint32)            { lapLayout[1].set(m, uint64(v)) }
func (m CMLap) RemoteQPN() uint32                   { return uint32(lapLayout[2].get(m)) }
func (m CMLap) SetRemoteQPN(v uint32)               { lapLayout[2].set(m, uint64(v)) }
func (m CMLap) RemoteCMResponseTimeout() uint8      { return uint8(lapLayout[3].get(m)) }
func (m CMLap) SetRemoteCMResponseTimeout(v uint8)  { lapLayout[3].set(m, uint64(v)) }
func (m CMLap) AlternateLocalPortLID() uint16       { return uint16(lapLayout[4].get(m)) }
func (m CMLap) SetAlternateLocalPortLID(v uint16)   { lapLayout[4].set(m, uint64(v)) }
func (m CMLap) AlternateRemotePortLID() uint16      { return uint16(lapLayout[5].get(m)) }
func (m CMLap) SetAlternateRemotePortLID(v uint16)  { lapLayout[5].set(m, uint64(v)) }
func (m CMLap) AlternateLocalPortGID() []byte       { return lapLayout[6].bytes(m) }
func (m CMLap) SetAlternateLocalPortGID(v []byte)   { lapLayout[6].putBytes(m, v) }
func (m CMLap) AlternateRemotePortGID() []byte      { return lapLayout[7].bytes(m) }
func (m CMLap) SetAlternateRemotePortGID(v []byte)  { lapLayout[7].putBytes(m, v) }
func (m CMLap) AlternateFlowLabel() uint32          { return uint32(lapLayout[8].get(m)) }
func (m CMLap) SetAlternateFlowLabel(v uint32)      { lapLayout[8].set(m, uint64(v)) }
func (m CMLap) AlternateTrafficClass() uint8        { return uint8(lapLayout[9].get(m)) }
func (m CMLap) SetAlternateTrafficClass(v uint8)    { lapLayout[9].set(m, uint64(v)) }
func (m CMLap) AlternateHopLimit() uint8            { return uint8(lapLayout[10].get(m)) }
func (m CMLap) SetAlternateHopLimit(v uint8)        { lapLayout[10].set(m, uint64(v)) }
func (m CMLap) AlternatePacketRate() uint8          { return uint8(lapLayout[11].get(m)) }
func (m CMLap) SetAlternatePacketRate(v uint8)      { lapLayout[11].set(m, uint64(v)) }
func (m CMLap) AlternateSL() uint8                  { return uint8(lapLayout[12].get(m)) }
func (m CMLap) SetAlternateSL(v uint8)              { lapLayout[12].set(m, uint64(v)) }
func (m CMLap) AlternateSubnetLocal() bool          { return lapLayout[13].get(m) != 0 }
func (m CMLap) SetAlternateSubnetLocal(v bool)      { lapLayout[13].set(m, b2u(v)) }
func (m CMLap) AlternateLocalACKTimeout() uint8     { return uint8(lapLayout[14].get(m)) }
func (m CMLap) SetAlternateLocalACKTimeout(v uint8) { lapLayout[14].set(m, uint64(v)) }
func (m CMLap) PrivateData() []byte                 { return lapLayout[15].bytes(m) }
func (m CMLap) SetPrivateData(v []byte)             { lapLayout[15].putBytes(m, v) }

// aprLayout is ibta_vol1_c12.h's Table 116 APR Message Contents (IBTA Vol 1
// section 12.6): byte offsets after the MAD header, bit offsets from the MSB.
var aprLayout = []CMField{
	{"LocalCommID", 0, 0, 32},
	{"RemoteCommID", 4, 0, 32},
	{"AdditionalInfoLength", 8, 0, 8},
	{"ARStatus", 9, 0, 8},
	{"AdditionalInfo", 12, 0, 576},
	{"PrivateData", 84, 0, 1184},
}

// CMApr is a view of a CM APR MAD (attribute CMAttrAPR): each field F
// of aprLayout has a getter F and a setter SetF (numbers masked to the
// field's width, byte strings cut or zero-filled to its length).
type CMApr MAD

// ParseCMApr returns the APR at the start of b: ParseCM's checks and attribute CMAttrAPR.
func ParseCMApr(b []byte) (CMApr, error) { m, err := parseCMAttr(b, CMAttrAPR); return CMApr(m), err }

// MAD returns the MAD view of m.
func (m CMApr) MAD() MAD                        { return MAD(m) }
func (m CMApr) LocalCommID() uint32             { return uint32(aprLayout[0].get(m)) }
func (m CMApr) SetLocalCommID(v uint32)         { aprLayout[0].set(m, uint64(v)) }
func (m CMApr) RemoteCommID() uint32            { return uint32(aprLayout[1].get(m)) }
func (m CMApr) SetRemoteCommID(v uint32)        { aprLayout[1].set(m, uint64(v)) }
func (m CMApr) AdditionalInfoLength() uint8     { return uint8(aprLayout[2].get(m)) }
func (m CMApr) SetAdditionalInfoLength(v uint8) { aprLayout[2].set(m, uint64(v)) }
func (m CMApr) ARStatus() uint8                 { return uint8(aprLayout[3].get(m)) }
func (m CMApr) SetARStatus(v uint8)             { aprLayout[3].set(m, uint64(v)) }
func (m CMApr) AdditionalInfo() []byte          { return aprLayout[4].bytes(m) }
func (m CMApr) SetAdditionalInfo(v []byte)      { aprLayout[4].putBytes(m, v) }
func (m CMApr) PrivateData() []byte             { return aprLayout[5].bytes(m) }
func (m CMApr) SetPrivateData(v []byte)         { aprLayout[5].putBytes(m, v) }

// CMLayout returns the field table of the CM message with attribute ID
// attr, in wire order, or nil for an attribute this package does not lay out.
// The slice is shared: do not modify it.
func CMLayout(attr uint16) []CMField {
	switch attr {
	case CMAttrREQ:
		return reqLayout
	case CMAttrMRA:
		return mraLayout
	case CMAttrREJ:
		return rejLayout
	case CMAttrREP:
		return repLayout
	case CMAttrRTU:
		return rtuLayout
	case CMAttrDREQ:
		return dreqLayout
	case CMAttrDREP:
		return drepLayout
	case CMAttrSIDRREQ:
		return sidrreqLayout
	case CMAttrSIDRREP:
		return sidrrepLayout
	case CMAttrLAP:
		return lapLayout
	case CMAttrAPR:
		return aprLayout
	}
	return nil
}
