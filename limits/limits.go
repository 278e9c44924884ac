package limits

import (
	"fmt"
	"iter"
	"maps"
	"strconv"
	"unicode/utf8"

	"github.com/heureka-registry/heureka/fsm"
)

// The limits. Each refusal is an *Error before anything reaches the log.
const (
	MaxNameBytes          = 256      // app names, instance ids, VIPs
	MaxMetadataEntries    = 1024     // per instance
	MaxMetadataKeyBytes   = 256      // per key
	MaxMetadataValueBytes = 16 << 10 // per value
)

// Error is a refused input. Its message names the field and the limit; it
// is a bad command (fsm.ErrBadCommand), so it keeps that identity across a
// node-to-node call and is a client error (400) at the HTTP edge.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

// Unwrap makes an Error a fsm.ErrBadCommand.
func (e *Error) Unwrap() error { return fsm.ErrBadCommand }

func refuse(msg string) error { return &Error{msg: msg} }

// CheckName refuses an app name, instance id or VIP that is empty, longer
// than MaxNameBytes, not UTF-8, holds a control character or a slash, or is
// a path trick ("." or ".."). kind names the field in the message.
func CheckName(kind, s string) error {
	switch {
	case s == "":
		return refuse(kind + " must not be empty")
	case len(s) > MaxNameBytes:
		return refuse(fmt.Sprintf("%s is %d bytes long; at most %d are allowed", kind, len(s), MaxNameBytes))
	case !utf8.ValidString(s):
		return refuse(kind + " is not valid UTF-8")
	case s == "." || s == "..":
		return refuse(kind + " " + strconv.Quote(s) + " is not allowed")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return refuse(kind + " " + strconv.Quote(s) + " holds a control character")
		}
		if r == '/' || r == '\\' {
			return refuse(kind + " " + strconv.Quote(s) + " holds a slash")
		}
	}
	return nil
}

// CheckMetadata refuses too many entries (n) and oversized keys or values.
// It takes the entries as a sequence so that a registration's metadata block
// and an update's map are checked alike.
func CheckMetadata(n int, entries iter.Seq2[string, string]) error {
	if n > MaxMetadataEntries {
		return refuse(fmt.Sprintf("metadata has %d entries; at most %d are allowed", n, MaxMetadataEntries))
	}
	for k, v := range entries {
		if len(k) > MaxMetadataKeyBytes {
			return refuse(fmt.Sprintf("metadata key %.40q... is %d bytes long; at most %d are allowed", k, len(k), MaxMetadataKeyBytes))
		}
		if len(v) > MaxMetadataValueBytes {
			return refuse(fmt.Sprintf("metadata value of %q is %d bytes long; at most %d are allowed", k, len(v), MaxMetadataValueBytes))
		}
		for _, r := range k {
			if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) { // as CheckName: C0, DEL and C1
				return refuse("metadata key " + strconv.Quote(k) + " holds a control character")
			}
		}
	}
	return nil
}

// CheckInstance applies the limits to a registration.
func CheckInstance(in *fsm.Instance) error {
	if in == nil {
		return refuse("registration without an instance")
	}
	if err := CheckName("app name", in.App); err != nil {
		return err
	}
	if err := CheckName("instance id", in.ID()); err != nil {
		return err
	}
	return CheckMetadata(in.Metadata.Len(), in.Metadata.All())
}

// CheckCommand applies the limits to a decoded client command (register,
// cancel, status override, metadata): what the HTTP edge checks before it
// encodes such a command, checked on the command itself. A metadata update
// must carry the entry limit (fsm.MetadataBody MaxEntries), which the FSM
// enforces on the merged map. Other command types pass: they are not
// client input (callers that take commands from peers decide which types
// they accept).
func CheckCommand(cmd fsm.Command) error {
	switch b := cmd.Body.(type) {
	case *fsm.RegisterBody:
		return CheckInstance(b.Instance)
	case *fsm.KeyBody:
		return checkKey(b.App, b.ID)
	case *fsm.OverrideBody:
		return checkKey(b.App, b.ID)
	case *fsm.MetadataBody:
		if err := checkKey(b.App, b.ID); err != nil {
			return err
		}
		if err := CheckMetadata(len(b.Metadata), maps.All(b.Metadata)); err != nil {
			return err
		}
		if b.MaxEntries <= 0 || b.MaxEntries > MaxMetadataEntries {
			return refuse(fmt.Sprintf("metadata update with an entry limit of %d; this node requires at most %d", b.MaxEntries, MaxMetadataEntries))
		}
	}
	return nil
}

func checkKey(app, id string) error {
	if err := CheckName("app name", app); err != nil {
		return err
	}
	return CheckName("instance id", id)
}
