// Package tooljson holds what the --json output of softnic's tools has in
// common: the conventions below, the value types that carry them, and
// [Decode], the strict reader the tests and "softnic demo" use.
//
// The conventions, for every tool:
//
//   - Standard output carries the JSON and nothing else; warnings,
//     banners, progress lines and notices go to standard error. A tool that
//     fails prints its error on standard error and, unless its document
//     says otherwise, nothing on standard output.
//   - Keys are lower_snake_case. A key that carries a unit names it
//     (t_avg_usec); otherwise the unit is in the field's doc comment.
//   - Addresses are strings in their usual text form: IP addresses as
//     "10.0.0.1" or "fd00::1", GIDs as IPv6 text, the form ibv_devinfo
//     prints for a RoCE v2 GID ("::ffff:127.0.0.2"; verbs.GID.MarshalText),
//     GUIDs as ibv_devinfo prints them ("5054:00ff:fe4d:7702").
//   - Counts, and values of up to 32 bits (QPNs, PSNs, keys), are JSON
//     numbers. 64-bit values (virtual addresses, atomic operands, sizes
//     that may reach 2^64-1) are [Hex64] strings, because many JSON readers
//     keep numbers as float64 and lose everything above 2^53.
//
// Each tool's documents are Go structs with json tags and doc comments:
// perftest.Result (write_bw and the other perftest look-alikes),
// decode.Record and decode.Summary (decode), devinfo.Device (info).
package tooljson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Hex64 is a 64-bit value written in JSON as a string of "0x" and 16
// lower-case hex digits ("0x00007f3a5c000000"), the width perftest prints a
// virtual address with.
type Hex64 uint64

// MarshalText writes h as "0x" and 16 hex digits.
func (h Hex64) MarshalText() ([]byte, error) {
	return fmt.Appendf(nil, "0x%016x", uint64(h)), nil
}

// UnmarshalText reads a "0x"-prefixed hex number of at most 64 bits.
func (h *Hex64) UnmarshalText(b []byte) error {
	s, ok := strings.CutPrefix(string(b), "0x")
	if !ok {
		return fmt.Errorf("%q is not a 0x-prefixed hex number", b)
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return fmt.Errorf("%q is not a 64-bit hex number", b)
	}
	*h = Hex64(v)
	return nil
}

// Decode reads exactly one JSON document from data into v, strictly: a
// key v has no field for is an error, and so is anything but white space
// after the document.
func Decode(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("more after the JSON document")
	}
	return nil
}
