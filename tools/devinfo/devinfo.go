// Package devinfo is the logic of "softnic info": a device's attributes
// in the layout of rdma-core's "ibv_devinfo -v" (libibverbs/examples/
// devinfo.c, rdma-core 44), so what people and scripts read off an rxe
// device they read off a softnic one the same way.
//
// # JSON output
//
// "softnic info --json" prints [Device]: the same attributes as one JSON
// object, on standard output and nothing else there, keyed by
// ibv_devinfo's names, with enumerations by name, MTUs in bytes, GUIDs and
// GIDs as the strings ibv_devinfo prints, and 64-bit masks and sizes as
// 0x strings (the conventions of package tooljson). Abridged:
//
//	{
//	  "hca_id": "softnic0",
//	  "transport": "InfiniBand",
//	  "fw_ver": "softnic 0.1",
//	  "node_guid": "0200:ffff:7f00:0001",
//	  "vendor_id": 16777215,
//	  "max_mr_size": "0xffffffffffffffff",
//	  "max_qp": 65536,
//	  "device_cap_flags": 19020918,
//	  "device_cap_flag_names": ["BAD_PKEY_CNTR", "BAD_QKEY_CNTR", ...],
//	  "max_qp_rd_atom": 128,
//	  "atomic_cap": "ATOMIC_HCA",
//	  ...
//	  "tm_caps": {"max_rndv_hdr_size": 64, "max_num_tags": 1023, "max_ops": 1024, "max_sge": 1, "flags": ["IBV_TM_CAP_RC"]},
//	  "ports": [
//	    {
//	      "port": 1,
//	      "state": "PORT_ACTIVE",
//	      "max_mtu": 4096,
//	      "active_mtu": 4096,
//	      "link_layer": "Ethernet",
//	      ...
//	      "gids": [{"index": 0, "gid": "::ffff:127.0.0.1", "type": "RoCE v2"}]
//	    }
//	  ]
//	}
package devinfo

import (
	"fmt"
	"io"
	"strings"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/tools/pingpong"
	"github.com/softnic/softnic/verbs"
)

// capNames are enum ibv_device_cap_flags in the order devinfo.c prints
// them.
var capNames = []struct {
	bit  uint64
	name string
}{
	{1 << 0, "RESIZE_MAX_WR"}, {1 << 1, "BAD_PKEY_CNTR"}, {1 << 2, "BAD_QKEY_CNTR"}, {1 << 3, "RAW_MULTI"},
	{1 << 4, "AUTO_PATH_MIG"}, {1 << 5, "CHANGE_PHY_PORT"}, {1 << 6, "UD_AV_PORT_ENFORCE"},
	{1 << 7, "CURR_QP_STATE_MOD"}, {1 << 8, "SHUTDOWN_PORT"}, {1 << 9, "INIT_TYPE"},
	{1 << 10, "PORT_ACTIVE_EVENT"}, {1 << 11, "SYS_IMAGE_GUID"}, {1 << 12, "RC_RNR_NAK_GEN"},
	{1 << 13, "SRQ_RESIZE"}, {1 << 14, "N_NOTIFY_CQ"}, {1 << 17, "MEM_WINDOW"}, {1 << 18, "UD_IP_CSUM"},
	{1 << 20, "XRC"}, {1 << 21, "MEM_MGT_EXTENSIONS"}, {1 << 23, "MEM_WINDOW_TYPE_2A"},
	{1 << 24, "MEM_WINDOW_TYPE_2B"}, {1 << 25, "RC_IP_CSUM"}, {1 << 26, "RAW_IP_CSUM"},
	{1 << 29, "MANAGED_FLOW_STEERING"},
}

// guid formats a GUID as guid_str does: four groups of four hex digits.
func guid(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48&0xffff, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}

func portState(s uint8) string {
	switch s {
	case 1:
		return "PORT_DOWN"
	case 2:
		return "PORT_INIT"
	case 3:
		return "PORT_ARMED"
	case 4:
		return "PORT_ACTIVE"
	case 5:
		return "PORT_ACTIVE_DEFER"
	}
	return "invalid state"
}

func physState(s uint8) string {
	names := []string{"", "SLEEP", "POLLING", "DISABLED", "PORT_CONFIGURATION TRAINNING", "LINK_UP", "LINK_ERROR_RECOVERY", "PHY TEST"}
	if int(s) < len(names) && s > 0 {
		return names[s]
	}
	return "invalid physical state"
}

func mtuStr(m ibv.MTU) string {
	if n := m.Bytes(); n > 0 {
		return fmt.Sprint(n)
	}
	return "invalid MTU"
}

func widthStr(w uint8) string {
	switch w {
	case 1:
		return "1"
	case 2:
		return "4"
	case 4:
		return "8"
	case 8:
		return "12"
	case 16:
		return "2"
	}
	return "invalid width"
}

func speedStr(s uint8) string {
	switch s {
	case 1:
		return "2.5 Gbps"
	case 2:
		return "5.0 Gbps"
	case 4, 8:
		return "10.0 Gbps"
	case 16:
		return "14.0 Gbps"
	case 32:
		return "25.0 Gbps"
	case 64:
		return "50.0 Gbps"
	case 128:
		return "100.0 Gbps"
	}
	return "invalid speed"
}

func atomicStr(a int) string {
	switch a {
	case 0:
		return "ATOMIC_NONE"
	case 1:
		return "ATOMIC_HCA"
	case 2:
		return "ATOMIC_GLOB"
	}
	return "invalid atomic capability"
}

// Options select what Write prints.
type Options struct {
	Port    int  // 0: every port
	Verbose bool // ibv_devinfo -v
}

// Write prints dev's attributes as ibv_devinfo does.
func Write(w io.Writer, dev *verbs.Device, o Options) error {
	a := dev.QueryDevice()
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("hca_id:\t%s\n", dev.Name())
	p("\ttransport:\t\t\t%s (%d)\n", "InfiniBand", 0)
	if a.FWVer != "" {
		p("\tfw_ver:\t\t\t\t%s\n", a.FWVer)
	}
	p("\tnode_guid:\t\t\t%s\n", guid(a.NodeGUID))
	p("\tsys_image_guid:\t\t\t%s\n", guid(a.SysImageGUID))
	p("\tvendor_id:\t\t\t0x%04x\n", a.VendorID)
	p("\tvendor_part_id:\t\t\t%d\n", a.VendorPartID)
	p("\thw_ver:\t\t\t\t0x%X\n", a.HWVer)
	p("\tphys_port_cnt:\t\t\t%d\n", a.PhysPortCnt)
	if o.Verbose {
		p("\tmax_mr_size:\t\t\t0x%x\n", a.MaxMRSize)
		p("\tpage_size_cap:\t\t\t0x%x\n", a.PageSizeCap)
		p("\tmax_qp:\t\t\t\t%d\n", a.MaxQP)
		p("\tmax_qp_wr:\t\t\t%d\n", a.MaxQPWR)
		p("\tdevice_cap_flags:\t\t0x%08x\n", uint32(a.DeviceCapFlags))
		var known uint64
		for _, c := range capNames {
			known |= c.bit
			if a.DeviceCapFlags&c.bit != 0 {
				p("\t\t\t\t\t%s\n", c.name)
			}
		}
		if u := uint32(a.DeviceCapFlags &^ known); u != 0 {
			p("\t\t\t\t\tUnknown flags: 0x%X\n", u)
		}
		p("\tmax_sge:\t\t\t%d\n", a.MaxSGE)
		p("\tmax_sge_rd:\t\t\t%d\n", a.MaxSGERd)
		p("\tmax_cq:\t\t\t\t%d\n", a.MaxCQ)
		p("\tmax_cqe:\t\t\t%d\n", a.MaxCQE)
		p("\tmax_mr:\t\t\t\t%d\n", a.MaxMR)
		p("\tmax_pd:\t\t\t\t%d\n", a.MaxPD)
		p("\tmax_qp_rd_atom:\t\t\t%d\n", a.MaxQPRdAtom)
		p("\tmax_ee_rd_atom:\t\t\t%d\n", a.MaxEERdAtom)
		p("\tmax_res_rd_atom:\t\t%d\n", a.MaxResRdAtom)
		p("\tmax_qp_init_rd_atom:\t\t%d\n", a.MaxQPInitRdAtom)
		p("\tmax_ee_init_rd_atom:\t\t%d\n", a.MaxEEInitRdAtom)
		p("\tatomic_cap:\t\t\t%s (%d)\n", atomicStr(a.AtomicCap), a.AtomicCap)
		p("\tmax_ee:\t\t\t\t%d\n", 0)
		p("\tmax_rdd:\t\t\t%d\n", 0)
		p("\tmax_mw:\t\t\t\t%d\n", a.MaxMW)
		p("\tmax_raw_ipv6_qp:\t\t%d\n", 0)
		p("\tmax_raw_ethy_qp:\t\t%d\n", 0)
		p("\tmax_mcast_grp:\t\t\t%d\n", a.MaxMcastGrp)
		p("\tmax_mcast_qp_attach:\t\t%d\n", a.MaxMcastQPAttach)
		p("\tmax_total_mcast_qp_attach:\t%d\n", a.MaxTotalMcastQPAttach)
		p("\tmax_ah:\t\t\t\t%d\n", a.MaxAH)
		p("\tmax_fmr:\t\t\t%d\n", a.MaxFMR)
		p("\tmax_srq:\t\t\t%d\n", a.MaxSRQ)
		if a.MaxSRQ > 0 {
			p("\tmax_srq_wr:\t\t\t%d\n", a.MaxSRQWR)
			p("\tmax_srq_sge:\t\t\t%d\n", a.MaxSRQSGE)
		}
		p("\tmax_pkeys:\t\t\t%d\n", a.MaxPKeys)
		p("\tlocal_ca_ack_delay:\t\t%d\n", a.LocalCAAckDelay)
		ax := dev.QueryDeviceEx()
		// libibverbs/examples/devinfo.c print_odp_caps: rxe has no ODP;
		// softnic, which pins nothing, has it on every transport but XRC.
		p("\tgeneral_odp_caps:\n")
		if ax.ODPCaps.GeneralCaps&ibv.ODPSupport != 0 {
			p("\t\t\t\t\tODP_SUPPORT\n")
		}
		if ax.ODPCaps.GeneralCaps&ibv.ODPSupportImplicit != 0 {
			p("\t\t\t\t\tODP_SUPPORT_IMPLICIT\n")
		}
		for _, tc := range []struct {
			name string
			caps uint32
		}{{"rc", ax.ODPCaps.RCODPCaps}, {"uc", ax.ODPCaps.UCODPCaps}, {"ud", ax.ODPCaps.UDODPCaps}, {"xrc", 0}} {
			p("\t%s_odp_caps:\n", tc.name)
			printODPTransCaps(p, tc.caps)
		}
		// The completion clock (devinfo.c; rxe has none).
		if ax.CompletionTimestampMask != 0 {
			p("\tcompletion timestamp_mask:\t\t\t0x%016x\n", ax.CompletionTimestampMask)
		} else {
			p("\tcompletion_timestamp_mask not supported\n")
		}
		if ax.HCACoreClock != 0 {
			p("\thca_core_clock:\t\t\t%dkHZ\n", ax.HCACoreClock)
		} else {
			p("\tcore clock not supported\n")
		}
		p("\tdevice_cap_flags_ex:\t\t0x%X\n", a.DeviceCapFlags)
		// libibverbs/examples/devinfo.c print_tso_caps: max_tso, then,
		// when it is not 0, the QP types (rxe: 0; softnic: UD).
		tc := dev.QueryDeviceEx().TSOCaps
		p("\ttso_caps:\n\t\tmax_tso:\t\t\t%d\n", tc.MaxTSO)
		if tc.MaxTSO > 0 {
			p("\t\tsupported_qp:\n")
			for _, q := range tsoQPTNames(tc) {
				p("\t\t\t\t\t%s\n", q)
			}
		}
		p("\trss_caps:\n")
		p("\t\tmax_rwq_indirection_tables:\t\t\t%d\n", 0)
		p("\t\tmax_rwq_indirection_table_size:\t\t\t%d\n", 0)
		p("\t\trx_hash_function:\t\t\t\t0x%x\n", 0)
		p("\t\trx_hash_fields_mask:\t\t\t\t0x%X\n", 0)
		p("\tmax_wq_type_rq:\t\t\t%d\n", ax.MaxWQTypeRQ)
		p("\tpacket_pacing_caps:\n\t\tqp_rate_limit_min:\t%dkbps\n\t\tqp_rate_limit_max:\t%dkbps\n", 0, 0)
		// libibverbs/examples/devinfo.c print_tm_caps: rxe has no tag
		// matching and prints "tag matching not supported"; softnic has.
		if tc := dev.QueryDeviceEx().TMCaps; tc.MaxNumTags > 0 {
			p("\tmax_rndv_hdr_size:\t\t%d\n", tc.MaxRndvHdrSize)
			p("\tmax_num_tags:\t\t\t%d\n", tc.MaxNumTags)
			p("\tmax_ops:\t\t\t%d\n", tc.MaxOps)
			p("\tmax_sge:\t\t\t%d\n", tc.MaxSGE)
			p("\tflags:\n")
			if tc.Flags&ibv.TMCapRC != 0 {
				p("\t\t\t\t\tIBV_TM_CAP_RC\n")
			}
		} else {
			p("\ttag matching not supported\n")
		}
		// devinfo.c print_cq_moderation_caps (rxe has no ibv_modify_cq).
		if m := ax.CQModCaps; m.MaxCQCount != 0 && m.MaxCQPeriod != 0 {
			p("\n\tcq moderation caps:\n")
			p("\t\tmax_cq_count:\t%d\n", m.MaxCQCount)
			p("\t\tmax_cq_period:\t%d us\n\n", m.MaxCQPeriod)
		}
		p("\tnum_comp_vectors:\t\t%d\n", 1)
		// Not in ibv_devinfo: the calls softnic deliberately does not
		// offer (they return EOPNOTSUPP), one line each.
		p("\tnot supported (EOPNOTSUPP):\n")
		for _, u := range verbs.Unsupported {
			p("\t\t\t\t\t%s: %s\n", u.Call, u.Reason)
		}
	}
	for port := 1; port <= int(a.PhysPortCnt); port++ {
		if o.Port != 0 && o.Port != port {
			continue
		}
		pa, err := dev.QueryPort(uint8(port))
		if err != nil {
			return fmt.Errorf("Failed to query port %d props: %w", port, err)
		}
		p("\t\tport:\t%d\n", port)
		p("\t\t\tstate:\t\t\t%s (%d)\n", portState(pa.State), pa.State)
		p("\t\t\tmax_mtu:\t\t%s (%d)\n", mtuStr(pa.MaxMTU), pa.MaxMTU)
		p("\t\t\tactive_mtu:\t\t%s (%d)\n", mtuStr(pa.ActiveMTU), pa.ActiveMTU)
		p("\t\t\tsm_lid:\t\t\t%d\n", pa.SMLID)
		p("\t\t\tport_lid:\t\t%d\n", pa.LID)
		p("\t\t\tport_lmc:\t\t0x%02x\n", pa.LMC)
		ll := "Ethernet"
		if pa.LinkLayer != verbs.LinkLayerEthernet {
			ll = "InfiniBand"
		}
		p("\t\t\tlink_layer:\t\t%s\n", ll)
		if o.Verbose {
			ctr := dev.Counters()
			p("\t\t\tmax_msg_sz:\t\t0x%x\n", uint32(pa.MaxMsgSz))
			p("\t\t\tport_cap_flags:\t\t0x%08x\n", pa.PortCapFlags)
			p("\t\t\tport_cap_flags2:\t0x%04x\n", 0)
			p("\t\t\tmax_vl_num:\t\t%s (%d)\n", map[uint8]string{1: "1", 2: "2", 3: "4", 4: "8", 5: "15"}[pa.MaxVLNum], pa.MaxVLNum)
			p("\t\t\tbad_pkey_cntr:\t\t0x%x\n", ctr.DropPKey)
			p("\t\t\tqkey_viol_cntr:\t\t0x%x\n", ctr.DropQKey)
			p("\t\t\tsm_sl:\t\t\t%d\n", 0)
			p("\t\t\tpkey_tbl_len:\t\t%d\n", pa.PKeyTblLen)
			p("\t\t\tgid_tbl_len:\t\t%d\n", pa.GIDTblLen)
			p("\t\t\tsubnet_timeout:\t\t%d\n", 0)
			p("\t\t\tinit_type_reply:\t%d\n", 0)
			p("\t\t\tactive_width:\t\t%sX (%d)\n", widthStr(pa.ActiveWidth), pa.ActiveWidth)
			p("\t\t\tactive_speed:\t\t%s (%d)\n", speedStr(pa.ActiveSpeed), pa.ActiveSpeed)
			p("\t\t\tphys_state:\t\t%s (%d)\n", physState(pa.PhysState), pa.PhysState)
			for i := 0; i < pa.GIDTblLen; i++ {
				g, err := dev.QueryGID(uint8(port), i)
				if err != nil {
					return fmt.Errorf("Failed to query gid to port %d, index %d: %w", port, i, err)
				}
				if g == (verbs.GID{}) {
					continue
				}
				p("\t\t\tGID[%3d]:\t\t%s, RoCE v2\n", i, pingpong.InetNtop6(g))
			}
		}
		p("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printODPTransCaps prints a transport's ODP capabilities as devinfo.c
// print_odp_trans_caps does.
func printODPTransCaps(p func(string, ...any), caps uint32) {
	if caps == 0 {
		p("\t\t\t\t\tNO SUPPORT\n")
		return
	}
	for _, c := range []struct {
		bit  uint32
		name string
	}{{ibv.ODPSupportSend, "SUPPORT_SEND"}, {ibv.ODPSupportRecv, "SUPPORT_RECV"}, {ibv.ODPSupportWrite, "SUPPORT_WRITE"},
		{ibv.ODPSupportRead, "SUPPORT_READ"}, {ibv.ODPSupportAtomic, "SUPPORT_ATOMIC"}, {ibv.ODPSupportSRQRecv, "SUPPORT_SRQ"}} {
		if caps&c.bit != 0 {
			p("\t\t\t\t\t%s\n", c.name)
		}
	}
}

// List prints ibv_devinfo -l's list of device names.
func List(w io.Writer, names []string) {
	s := ""
	if len(names) != 1 {
		s = "s"
	}
	fmt.Fprintf(w, "%d HCA%s found:\n", len(names), s)
	for _, n := range names {
		fmt.Fprintf(w, "\t%s\n", n)
	}
}
