package ibv

import "fmt"

// FormatEnum prints an enum or flag value of name under fmt's verbs: its
// name under %v and %s (and quoted under %q), its number under the
// integer verbs (%d, %x, %X, %o, %O, %b, %c, %U), and as Go prints an
// unsigned integer under %#v (0x4). Without it fmt would print the hex of
// the name under %x, as it does for any Stringer, so that C code ported to
// Go (printf("%x", wc.opcode)) printed 0x524543565f... for
// RECV_RDMA_WITH_IMM. Every enum of ibv and verbs implements
// fmt.Formatter with it.
func FormatEnum(f fmt.State, verb rune, v uint64, name func() string) {
	switch verb {
	case 'v':
		if f.Flag('#') {
			fmt.Fprintf(f, "%#x", v)
			return
		}
		fmt.Fprintf(f, fmt.FormatString(f, 's'), name())
	case 's', 'q':
		fmt.Fprintf(f, fmt.FormatString(f, verb), name())
	default:
		fmt.Fprintf(f, fmt.FormatString(f, verb), v)
	}
}

// Format implements fmt.Formatter (FormatEnum): the name under %v, the
// number under %d and %x.
func (t QPType) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(t), t.String) }

// Format implements fmt.Formatter (FormatEnum).
func (s QPState) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(s), s.String) }

// Format implements fmt.Formatter (FormatEnum): the bytes under %v, the
// enum value (IBV_MTU_1024 = 3) under %d.
func (m MTU) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(m), m.String) }

// Format implements fmt.Formatter (FormatEnum).
func (a Access) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(a), a.String) }

// Format implements fmt.Formatter (FormatEnum).
func (o WROpcode) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(o), o.String) }

// Format implements fmt.Formatter (FormatEnum).
func (s SendFlags) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(s), s.String) }

// Format implements fmt.Formatter (FormatEnum).
func (s WCStatus) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(s), s.String) }

// Format implements fmt.Formatter (FormatEnum).
func (o WCOpcode) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(o), o.String) }

// Format implements fmt.Formatter (FormatEnum).
func (w WCFlags) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(w), w.String) }

// Format implements fmt.Formatter (FormatEnum).
func (m AttrMask) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(m), m.String) }

// Format implements fmt.Formatter (FormatEnum).
func (s WQState) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(s), s.String) }

// Format implements fmt.Formatter (FormatEnum).
func (t WQType) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(t), t.String) }

// Format implements fmt.Formatter (FormatEnum).
func (m WQAttrMask) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(m), m.String) }

// Format implements fmt.Formatter (FormatEnum).
func (m SRQAttrMask) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(m), m.String) }

// Format implements fmt.Formatter (FormatEnum).
func (t SRQType) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(t), t.String) }

// Format implements fmt.Formatter (FormatEnum).
func (o OpsOpcode) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(o), o.String) }

// Format implements fmt.Formatter (FormatEnum).
func (o OpsFlags) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(o), o.String) }

// Format implements fmt.Formatter (FormatEnum).
func (t AsyncEventType) Format(f fmt.State, verb rune) { FormatEnum(f, verb, uint64(t), t.String) }
