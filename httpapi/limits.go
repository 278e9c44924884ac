package httpapi

import (
	"fmt"

	"github.com/heureka-registry/heureka/fsm"
	"github.com/heureka-registry/heureka/limits"
)

// The input limits applied when Config.StrictInput is on are package
// limits' (the leader applies the same to commands from peers); this file
// applies them to what the HTTP API receives. Each refusal is a 400 with a
// message, before anything reaches the log.

// checkMergedMetadata refuses a metadata update that would leave app/id
// holding more than limits.MaxMetadataEntries entries. The limit is on what the
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
	if total > limits.MaxMetadataEntries {
		return badRequestf(fmt.Sprintf("metadata would have %d entries after this update; at most %d are allowed", total, limits.MaxMetadataEntries))
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
		if err := limits.CheckName("app name", segs[1]); err != nil {
			return err
		}
		if len(segs) >= 3 {
			return limits.CheckName("instance id", segs[2])
		}
	case "instances":
		return limits.CheckName("instance id", segs[1])
	case "vips", "svips":
		return limits.CheckName("VIP address", segs[1])
	}
	return nil
}
