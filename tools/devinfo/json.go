package devinfo

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/tooljson"
	"github.com/softnic/softnic/verbs"
)

// Device is what "softnic info --json" prints: the attributes
// "ibv_devinfo -v" shows, as one JSON object with ibv_devinfo's names for
// keys. Enumerations are the names ibv_devinfo prints ("PORT_ACTIVE"),
// MTUs are bytes, and the constant zeros ibv_devinfo lists for features
// neither rxe nor softnic has (EE, RDD, raw QPs, multicast, ODP, TSO,
// RSS) are left out. The package documentation shows an
// example.
type Device struct {
	// HCAID is the device's name (hca_id; softnic0 unless -d).
	HCAID string `json:"hca_id"`
	// Transport is "InfiniBand", as rxe reports it.
	Transport string `json:"transport"`
	// FWVer is the firmware version string; empty when there is none.
	FWVer string `json:"fw_ver"`
	// NodeGUID and SysImageGUID are the node and system image GUIDs.
	NodeGUID     GUID `json:"node_guid"`
	SysImageGUID GUID `json:"sys_image_guid"`
	// VendorID is the IEEE vendor ID (0xffffff for rxe and softnic),
	// VendorPartID and HWVer the vendor's part number and revision.
	VendorID     uint32 `json:"vendor_id"`
	VendorPartID uint32 `json:"vendor_part_id"`
	HWVer        uint32 `json:"hw_ver"`
	// PhysPortCnt is the number of ports.
	PhysPortCnt uint8 `json:"phys_port_cnt"`
	// MaxMRSize is the largest memory region in bytes, a 0x string.
	MaxMRSize tooljson.Hex64 `json:"max_mr_size"`
	// PageSizeCap is the mask of supported page sizes, a 0x string.
	PageSizeCap tooljson.Hex64 `json:"page_size_cap"`
	// MaxQP is the number of QPs, MaxQPWR the work requests per queue.
	MaxQP   int `json:"max_qp"`
	MaxQPWR int `json:"max_qp_wr"`
	// DeviceCapFlags is enum ibv_device_cap_flags' bits (the low 32, as
	// ibv_devinfo prints them), DeviceCapNames the names of the bits set,
	// in ibv_devinfo's order.
	DeviceCapFlags uint32   `json:"device_cap_flags"`
	DeviceCapNames []string `json:"device_cap_flag_names"`
	// MaxSGE is the scatter/gather entries per WR, MaxSGERd per READ.
	MaxSGE   int `json:"max_sge"`
	MaxSGERd int `json:"max_sge_rd"`
	// MaxCQ is the number of CQs, MaxCQE the entries per CQ.
	MaxCQ  int `json:"max_cq"`
	MaxCQE int `json:"max_cqe"`
	// MaxMR and MaxPD are the numbers of MRs and PDs.
	MaxMR int `json:"max_mr"`
	MaxPD int `json:"max_pd"`
	// MaxQPRdAtom is the READs and atomics a QP accepts at once as a
	// responder, MaxQPInitRdAtom those it issues at once; MaxResRdAtom the
	// device's total as a responder; the EE ones are 0.
	MaxQPRdAtom     int `json:"max_qp_rd_atom"`
	MaxEERdAtom     int `json:"max_ee_rd_atom"`
	MaxResRdAtom    int `json:"max_res_rd_atom"`
	MaxQPInitRdAtom int `json:"max_qp_init_rd_atom"`
	MaxEEInitRdAtom int `json:"max_ee_init_rd_atom"`
	// AtomicCap is "ATOMIC_NONE", "ATOMIC_HCA" or "ATOMIC_GLOB".
	AtomicCap string `json:"atomic_cap"`
	// MaxMW, MaxAH and MaxFMR are the numbers of memory windows, address
	// handles and FMRs.
	MaxMW  int `json:"max_mw"`
	MaxAH  int `json:"max_ah"`
	MaxFMR int `json:"max_fmr"`
	// MaxSRQ is the number of SRQs, MaxSRQWR and MaxSRQSGE their work
	// requests and scatter entries.
	MaxSRQ    int `json:"max_srq"`
	MaxSRQWR  int `json:"max_srq_wr"`
	MaxSRQSGE int `json:"max_srq_sge"`
	// MaxPKeys is the size of the P_Key table.
	MaxPKeys int `json:"max_pkeys"`
	// TMCaps are the tag-matching capabilities (ibv_query_device_ex's
	// tm_caps), zero when there is no tag matching.
	TMCaps TMCaps `json:"tm_caps"`
	// TSOCaps are the segmentation-offload capabilities
	// (ibv_query_device_ex's tso_caps), zero when there is no TSO.
	TSOCaps TSOCaps `json:"tso_caps"`
	// LocalCAAckDelay is the local CA ACK delay exponent
	// (4.096 µs × 2^value).
	LocalCAAckDelay uint8 `json:"local_ca_ack_delay"`
	// NumCompVectors is the number of completion vectors.
	NumCompVectors int `json:"num_comp_vectors"`
	// NotSupported are the libibverbs calls softnic deliberately does
	// not offer (they return EOPNOTSUPP; verbs.Unsupported), as the text
	// output's "not supported" lines list them.
	NotSupported []NotSupported `json:"not_supported"`
	// CongestionControl is the device's congestion control when it is
	// on (--cc dcqcn), absent when off, as the text output's
	// "congestion_control" lines show it.
	CongestionControl *CongestionControl `json:"congestion_control,omitempty"`
	// Ports are the ports shown: all of them, or the one -i names.
	Ports []Port `json:"ports"`
}

// CongestionControl is the algorithm ("dcqcn") and its parameters, each
// under mlx5's name (cc_params in debugfs, drivers/infiniband/hw/mlx5/
// cong.c) in mlx5's unit, which the key's unit object names.
type CongestionControl struct {
	Algorithm string             `json:"algorithm"`
	Params    map[string]float64 `json:"params"`
	Units     map[string]string  `json:"units"`
}

// NotSupported is a libibverbs call softnic does not offer, and why.
type NotSupported struct {
	Call   string `json:"call"`
	Reason string `json:"reason"`
}

// TMCaps are a device's tag-matching capabilities (struct ibv_tm_caps),
// as ibv_devinfo -v prints them.
type TMCaps struct {
	// MaxRndvHdrSize is the largest TMH + RVH + user header of a
	// rendezvous request.
	MaxRndvHdrSize int `json:"max_rndv_hdr_size"`
	// MaxNumTags is the largest tag list, MaxOps the most list operations
	// at once, MaxSGE the SGEs of a tagged buffer.
	MaxNumTags int `json:"max_num_tags"`
	MaxOps     int `json:"max_ops"`
	MaxSGE     int `json:"max_sge"`
	// Flags are the flags' names: "IBV_TM_CAP_RC".
	Flags []string `json:"flags"`
}

// TSOCaps are a device's segmentation-offload capabilities (struct
// ibv_tso_caps), as ibv_devinfo -v prints them.
type TSOCaps struct {
	// MaxTSO is the largest payload of one TSO work request.
	MaxTSO int `json:"max_tso"`
	// SupportedQP are the QP types that take TSO, by devinfo.c's names:
	// "SUPPORT_UD", "SUPPORT_RAW_PACKET".
	SupportedQP []string `json:"supported_qp"`
}

// tsoQPTNames names the QP types of tso_caps.supported_qpts as devinfo.c
// print_tso_caps does.
func tsoQPTNames(c ibv.TSOCaps) []string {
	names := []string{}
	for _, q := range []struct {
		t    ibv.QPType
		name string
	}{{ibv.QPTypeRawPacket, "SUPPORT_RAW_PACKET"}, {ibv.QPTypeUD, "SUPPORT_UD"}} {
		if c.Supports(q.t) {
			names = append(names, q.name)
		}
	}
	return names
}

// Port is one port of a Device (struct ibv_port_attr and its GID table).
type Port struct {
	// Port is the port number, from 1.
	Port int `json:"port"`
	// State is "PORT_DOWN", "PORT_INIT", "PORT_ARMED", "PORT_ACTIVE" or
	// "PORT_ACTIVE_DEFER".
	State string `json:"state"`
	// MaxMTU and ActiveMTU are the largest and the current MTU, in bytes.
	MaxMTU    int `json:"max_mtu"`
	ActiveMTU int `json:"active_mtu"`
	// SMLID, LID and LMC are the subnet manager's LID, the port's LID and
	// its LID mask count: 0 on RoCE.
	SMLID uint16 `json:"sm_lid"`
	LID   uint16 `json:"port_lid"`
	LMC   uint8  `json:"port_lmc"`
	// LinkLayer is "Ethernet" (RoCE) or "InfiniBand".
	LinkLayer string `json:"link_layer"`
	// MaxMsgSz is the largest message in bytes.
	MaxMsgSz uint32 `json:"max_msg_sz"`
	// PortCapFlags is enum ibv_port_cap_flags' bits.
	PortCapFlags uint32 `json:"port_cap_flags"`
	// MaxVLNum is the number of data VLs.
	MaxVLNum int `json:"max_vl_num"`
	// BadPKeyCntr and QKeyViolCntr count packets dropped for a bad P_Key
	// and a bad Q_Key.
	BadPKeyCntr  uint64 `json:"bad_pkey_cntr"`
	QKeyViolCntr uint64 `json:"qkey_viol_cntr"`
	// PKeyTblLen and GIDTblLen are the sizes of the P_Key and GID tables.
	PKeyTblLen int `json:"pkey_tbl_len"`
	GIDTblLen  int `json:"gid_tbl_len"`
	// ActiveWidth is the link width ("1X", "4X", ...), ActiveSpeed the
	// lane speed ("2.5 Gbps", ...), PhysState the physical state
	// ("LINK_UP", ...), as ibv_devinfo names them.
	ActiveWidth string `json:"active_width"`
	ActiveSpeed string `json:"active_speed"`
	PhysState   string `json:"phys_state"`
	// GIDs are the GID table's non-zero entries.
	GIDs []GIDEntry `json:"gids"`
}

// GIDEntry is one entry of a port's GID table.
type GIDEntry struct {
	// Index is the entry's index (ibv_query_gid's index, perftest's -x).
	Index int `json:"index"`
	// GID is the GID as ibv_devinfo prints a RoCE v2 GID
	// ("::ffff:127.0.0.1").
	GID verbs.GID `json:"gid"`
	// Type is the GID type: "RoCE v2".
	Type string `json:"type"`
}

// GUID is a 64-bit GUID, a string in JSON in ibv_devinfo's form: four
// groups of four hex digits ("5054:00ff:fe4d:7702").
type GUID uint64

// MarshalText writes g as ibv_devinfo's guid_str does.
func (g GUID) MarshalText() ([]byte, error) { return []byte(guid(uint64(g))), nil }

// UnmarshalText reads what MarshalText writes.
func (g *GUID) UnmarshalText(b []byte) error {
	var w [4]uint16
	n, err := fmt.Sscanf(string(b), "%4x:%4x:%4x:%4x", &w[0], &w[1], &w[2], &w[3])
	if err != nil || n != 4 || len(b) != 19 {
		return fmt.Errorf("GUID %q is not four groups of four hex digits", b)
	}
	*g = GUID(uint64(w[0])<<48 | uint64(w[1])<<32 | uint64(w[2])<<16 | uint64(w[3]))
	return nil
}

// Query returns dev's attributes as "softnic info --json" prints them;
// o.Port picks one port (0: all). o.Verbose does not matter: the JSON
// always has everything.
func Query(dev *verbs.Device, o Options) (Device, error) {
	a := dev.QueryDevice()
	d := Device{
		HCAID: dev.Name(), Transport: "InfiniBand", FWVer: a.FWVer,
		NodeGUID: GUID(a.NodeGUID), SysImageGUID: GUID(a.SysImageGUID),
		VendorID: a.VendorID, VendorPartID: a.VendorPartID, HWVer: a.HWVer, PhysPortCnt: a.PhysPortCnt,
		MaxMRSize: tooljson.Hex64(a.MaxMRSize), PageSizeCap: tooljson.Hex64(a.PageSizeCap),
		MaxQP: a.MaxQP, MaxQPWR: a.MaxQPWR, DeviceCapFlags: uint32(a.DeviceCapFlags), DeviceCapNames: []string{},
		MaxSGE: a.MaxSGE, MaxSGERd: a.MaxSGERd, MaxCQ: a.MaxCQ, MaxCQE: a.MaxCQE, MaxMR: a.MaxMR, MaxPD: a.MaxPD,
		MaxQPRdAtom: a.MaxQPRdAtom, MaxEERdAtom: a.MaxEERdAtom, MaxResRdAtom: a.MaxResRdAtom,
		MaxQPInitRdAtom: a.MaxQPInitRdAtom, MaxEEInitRdAtom: a.MaxEEInitRdAtom, AtomicCap: atomicStr(a.AtomicCap),
		MaxMW: a.MaxMW, MaxAH: a.MaxAH, MaxFMR: a.MaxFMR, MaxSRQ: a.MaxSRQ, MaxSRQWR: a.MaxSRQWR, MaxSRQSGE: a.MaxSRQSGE,
		MaxPKeys: a.MaxPKeys, LocalCAAckDelay: a.LocalCAAckDelay, NumCompVectors: 1, Ports: []Port{},
	}
	for _, c := range capNames {
		if a.DeviceCapFlags&c.bit != 0 {
			d.DeviceCapNames = append(d.DeviceCapNames, c.name)
		}
	}
	d.NotSupported = []NotSupported{}
	for _, u := range verbs.Unsupported {
		d.NotSupported = append(d.NotSupported, NotSupported{Call: u.Call, Reason: u.Reason})
	}
	if cc := dev.CC(); cc != nil {
		d.CongestionControl = &CongestionControl{Algorithm: "dcqcn", Params: map[string]float64{}, Units: map[string]string{}}
		for _, q := range cc.List() {
			d.CongestionControl.Params[q.Name] = q.Value
			if q.Unit != "" {
				d.CongestionControl.Units[q.Name] = q.Unit
			}
		}
	}
	tc := dev.QueryDeviceEx().TMCaps
	d.TMCaps = TMCaps{MaxRndvHdrSize: int(tc.MaxRndvHdrSize), MaxNumTags: int(tc.MaxNumTags), MaxOps: int(tc.MaxOps),
		MaxSGE: int(tc.MaxSGE), Flags: []string{}}
	if tc.Flags&ibv.TMCapRC != 0 {
		d.TMCaps.Flags = append(d.TMCaps.Flags, "IBV_TM_CAP_RC")
	}
	xc := dev.QueryDeviceEx().TSOCaps
	d.TSOCaps = TSOCaps{MaxTSO: int(xc.MaxTSO), SupportedQP: tsoQPTNames(xc)}
	for port := 1; port <= int(a.PhysPortCnt); port++ {
		if o.Port != 0 && o.Port != port {
			continue
		}
		pa, err := dev.QueryPort(uint8(port))
		if err != nil {
			return d, fmt.Errorf("Failed to query port %d props: %w", port, err)
		}
		ll := "Ethernet"
		if pa.LinkLayer != verbs.LinkLayerEthernet {
			ll = "InfiniBand"
		}
		ctr := dev.Counters()
		p := Port{
			Port: port, State: portState(pa.State), MaxMTU: pa.MaxMTU.Bytes(), ActiveMTU: pa.ActiveMTU.Bytes(),
			SMLID: pa.SMLID, LID: pa.LID, LMC: pa.LMC, LinkLayer: ll, MaxMsgSz: uint32(pa.MaxMsgSz),
			PortCapFlags: pa.PortCapFlags, MaxVLNum: map[uint8]int{1: 1, 2: 2, 3: 4, 4: 8, 5: 15}[pa.MaxVLNum],
			BadPKeyCntr: ctr.DropPKey, QKeyViolCntr: ctr.DropQKey,
			PKeyTblLen: int(pa.PKeyTblLen), GIDTblLen: pa.GIDTblLen,
			ActiveWidth: widthStr(pa.ActiveWidth) + "X", ActiveSpeed: speedStr(pa.ActiveSpeed), PhysState: physState(pa.PhysState),
			GIDs: []GIDEntry{},
		}
		for i := 0; i < pa.GIDTblLen; i++ {
			g, err := dev.QueryGID(uint8(port), i)
			if err != nil {
				return d, fmt.Errorf("Failed to query gid to port %d, index %d: %w", port, i, err)
			}
			if g != (verbs.GID{}) {
				p.GIDs = append(p.GIDs, GIDEntry{Index: i, GID: g, Type: "RoCE v2"})
			}
		}
		d.Ports = append(d.Ports, p)
	}
	return d, nil
}

// WriteJSON prints Query's Device as one indented JSON object.
func WriteJSON(w io.Writer, dev *verbs.Device, o Options) error {
	d, err := Query(dev, o)
	if err != nil {
		return err
	}
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(d)
}
