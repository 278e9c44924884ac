package httpapi

import (
	"fmt"
	"time"

	"github.com/heureka-registry/heureka/fsm"
)

// Expired leases, as eureka-server's JAX-RS resources see them: an
// instance whose lease ran out but was not evicted yet reads, and takes
// status or metadata updates, as missing.

// leaseSlack is how much later than one lease duration a lease still counts
// as live in reads: a follower learns renewals from the log, which gathers
// them for up to the renew batch interval (1s by default).
const leaseSlack = 2 * time.Second

// liveLease returns fsm.ErrInstanceNotFound when app/id (app empty: any
// application) is registered with a lease that has expired but has not been
// evicted yet: eureka-server's lookups skip such leases, so reads and status
// or metadata updates of the instance answer 404. An instance this node does
// not hold passes: the read or write that follows decides (after its
// consistency checks, which may wait for the log).
func (s *Server) liveLease(app, id string) error {
	var e *fsm.Entry
	s.cluster.Read(func(r *fsm.Registry) {
		if app == "" {
			e = r.FindByID(id)
		} else {
			e = r.Get(app, id)
		}
	})
	if e != nil && s.cfg.Now().UnixMilli() > e.ExpiresAt()+leaseSlack.Milliseconds() {
		return fmt.Errorf("instance %s/%s: lease expired: %w", app, id, fsm.ErrInstanceNotFound)
	}
	return nil
}
