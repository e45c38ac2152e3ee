package verbs

import (
	"fmt"
	"net"

	"github.com/softnic/softnic/ibv"
	"github.com/softnic/softnic/wire"
)

// GIDEntry is one entry of a port's GID table (struct ibv_gid_entry).
type GIDEntry struct {
	GID      GID         // gid
	GIDIndex uint32      // gid_index
	PortNum  uint32      // port_num
	GIDType  ibv.GIDType // gid_type
	// NdevIfindex is ndev_ifindex: the index of the network interface
	// that holds the device's address, 0 when none does (a fabric
	// endpoint).
	NdevIfindex uint32
}

// gidEntries returns port 1's GID table: softnic's has one entry, the
// device's address, a RoCE v2 GID, as rxe's port is RoCE v2 only
// (rxe_port_immutable: RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP) and lists each
// address of its netdev once, typed RoCE v2.
func (d *Device) gidEntries() []GIDEntry {
	return []GIDEntry{{GID: GID(d.n.GID()), GIDIndex: 0, PortNum: 1, GIDType: ibv.GIDTypeRoCEv2,
		NdevIfindex: ifindexOf(d.Addr().String())}}
}

// ifindexOf returns the index of the network interface holding address
// addr, or 0.
func ifindexOf(addr string) uint32 {
	ifs, err := net.Interfaces()
	if err != nil {
		return 0
	}
	for _, ifi := range ifs {
		addrs, err := ifi.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.String() == addr {
				return uint32(ifi.Index)
			}
		}
	}
	return 0
}

// QueryGIDEx returns the GID table entry index of port port
// (ibv_query_gid_ex): the GID, its index, port, type and network
// interface. flags must be 0 (EINVAL); a port other than 1 or an index
// outside the table is EINVAL, as for QueryGID.
func (d *Device) QueryGIDEx(port, index, flags uint32) (GIDEntry, error) {
	if err := d.check(); err != nil {
		return GIDEntry{}, err
	}
	if flags != 0 {
		return GIDEntry{}, fmt.Errorf("%w: ibv_query_gid_ex flags %#x (must be 0)", EINVAL, flags)
	}
	tbl := d.gidEntries()
	if port != 1 || index >= uint32(len(tbl)) {
		return GIDEntry{}, fmt.Errorf("%w: GID %d/%d (the table has port 1 index 0..%d)", EINVAL, port, index, len(tbl)-1)
	}
	return tbl[index], nil
}

// QueryGIDTable copies the valid entries of every port's GID table into
// entries and returns how many (ibv_query_gid_table): EINVAL when
// entries cannot hold them all or is empty, or flags is not 0.
func (d *Device) QueryGIDTable(entries []GIDEntry, flags uint32) (int, error) {
	if err := d.check(); err != nil {
		return 0, err
	}
	if flags != 0 {
		return 0, fmt.Errorf("%w: ibv_query_gid_table flags %#x (must be 0)", EINVAL, flags)
	}
	tbl := d.gidEntries()
	if len(entries) < len(tbl) {
		return 0, fmt.Errorf("%w: room for %d GID entries, the table has %d", EINVAL, len(entries), len(tbl))
	}
	return copy(entries, tbl), nil
}

// QueryGIDType returns the type of GID index of port port
// (ibv_query_gid_type): ibv.GIDTypeRoCEv2 for softnic's one entry;
// QueryGIDEx's refusals.
func (d *Device) QueryGIDType(port uint8, index int) (ibv.GIDType, error) {
	if index < 0 {
		return 0, fmt.Errorf("%w: GID index %d", EINVAL, index)
	}
	e, err := d.QueryGIDEx(uint32(port), uint32(index), 0)
	return e.GIDType, err
}

// QueryPKey returns entry index of port port's P_Key table
// (ibv_query_pkey), in host order (the C call's is in network order):
// softnic's table, as rxe's, holds one entry, the default P_Key 0xffff
// (full membership of the default partition), at index 0. A port other
// than 1 or another index is EINVAL.
func (d *Device) QueryPKey(port uint8, index int) (uint16, error) {
	if err := d.check(); err != nil {
		return 0, err
	}
	if port != 1 || index != 0 {
		return 0, fmt.Errorf("%w: P_Key %d/%d (the table has port 1 index 0)", EINVAL, port, index)
	}
	return wire.DefaultPKey, nil
}

// GetPKeyIndex returns the index of pkey (host order) in port port's
// P_Key table (ibv_get_pkey_index): 0 for 0xffff; ENOENT for a P_Key the
// table lacks (where the C call returns -1), EINVAL for a port other
// than 1.
func (d *Device) GetPKeyIndex(port uint8, pkey uint16) (int, error) {
	if err := d.check(); err != nil {
		return 0, err
	}
	if port != 1 {
		return 0, fmt.Errorf("%w: port %d (the device has port 1)", EINVAL, port)
	}
	if pkey != wire.DefaultPKey {
		return 0, fmt.Errorf("%w: P_Key %#04x is not in the table (it holds %#04x)", ENOENT, pkey, wire.DefaultPKey)
	}
	return 0, nil
}
