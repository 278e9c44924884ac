package httpapi

import (
	"fmt"
	"iter"
	"strconv"
	"unicode/utf8"

	"github.com/heureka-registry/heureka/fsm"
)

// Input limits applied when Config.StrictInput is on. Each refusal is a 400
// with a message, before anything reaches the log.
const (
	maxNameBytes          = 256      // app names, instance ids, VIPs
	maxMetadataEntries    = 1024     // per instance
	maxMetadataKeyBytes   = 256      // per key
	maxMetadataValueBytes = 16 << 10 // per value
)

// checkName refuses an app name, instance id or VIP that is empty, longer
// than maxNameBytes, not UTF-8, holds a control character or '/', or is a
// path trick ("." or "..").
func checkName(kind, s string) error {
	switch {
	case s == "":
		return badRequestf(kind + " must not be empty")
	case len(s) > maxNameBytes:
		return badRequestf(fmt.Sprintf("%s is %d bytes long; at most %d are allowed", kind, len(s), maxNameBytes))
	case !utf8.ValidString(s):
		return badRequestf(kind + " is not valid UTF-8")
	case s == "." || s == "..":
		return badRequestf(kind + " " + strconv.Quote(s) + " is not allowed")
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return badRequestf(kind + " " + strconv.Quote(s) + " holds a control character")
		}
		if r == '/' || r == '\\' {
			return badRequestf(kind + " " + strconv.Quote(s) + " holds a slash")
		}
	}
	return nil
}

// checkMetadata refuses too many entries (n) and oversized keys or values.
// It takes the entries as a sequence so that a registration's metadata block
// and a PUT's map are checked alike.
func checkMetadata(n int, entries iter.Seq2[string, string]) error {
	if n > maxMetadataEntries {
		return badRequestf(fmt.Sprintf("metadata has %d entries; at most %d are allowed", n, maxMetadataEntries))
	}
	for k, v := range entries {
		if len(k) > maxMetadataKeyBytes {
			return badRequestf(fmt.Sprintf("metadata key %.40q... is %d bytes long; at most %d are allowed", k, len(k), maxMetadataKeyBytes))
		}
		if len(v) > maxMetadataValueBytes {
			return badRequestf(fmt.Sprintf("metadata value of %q is %d bytes long; at most %d are allowed", k, len(v), maxMetadataValueBytes))
		}
		for _, r := range k {
			if r < 0x20 || r == 0x7f {
				return badRequestf("metadata key " + strconv.Quote(k) + " holds a control character")
			}
		}
	}
	return nil
}

// checkMergedMetadata refuses a metadata update that would leave app/id
// holding more than maxMetadataEntries entries. The limit is on what the
// instance holds, not on one request: an update merges into the stored
// map, so counting only its own keys let repeated updates grow an entry
// without bound. The FSM decides, in log order (fsm.MetadataBody
// MaxEntries), so updates racing on different nodes cannot pass it
// together; this check, from this node's copy, only spares the log an
// update that is already too large.
func (s *Server) checkMergedMetadata(app, id string, md map[string]string) error {
	total := len(md)
	s.cluster.Read(func(r *fsm.Registry) {
		if e := r.Get(app, id); e != nil {
			for k := range e.Instance.Metadata.All() {
				if _, updated := md[k]; !updated {
					total++
				}
			}
		}
	})
	if total > maxMetadataEntries {
		return badRequestf(fmt.Sprintf("metadata would have %d entries after this update; at most %d are allowed", total, maxMetadataEntries))
	}
	return nil
}

// checkPath applies the name checks to a Eureka path's segments (after the
// version segment): the app name and instance id of /apps routes, the id of
// /instances, the VIP of /vips and /svips.
func checkPath(segs []string) error {
	if len(segs) < 2 {
		return nil
	}
	switch segs[0] {
	case "apps":
		if len(segs) == 2 && segs[1] == "delta" {
			return nil
		}
		if err := checkName("app name", segs[1]); err != nil {
			return err
		}
		if len(segs) >= 3 {
			return checkName("instance id", segs[2])
		}
	case "instances":
		return checkName("instance id", segs[1])
	case "vips", "svips":
		return checkName("VIP address", segs[1])
	}
	return nil
}

// checkInstance applies the limits to a register body.
func checkInstance(in *fsm.Instance) error {
	if err := checkName("app name", in.App); err != nil {
		return err
	}
	if err := checkName("instance id", in.ID()); err != nil {
		return err
	}
	return checkMetadata(in.Metadata.Len(), in.Metadata.All())
}
