package fsm

import (
	"bytes"
	"fmt"
	"slices"
	"sort"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// Remote regions (docs/regions.md): the leader of the local cluster copies
// the registry of each configured remote region and writes what changed
// through the log as CmdRegionUpdate, so every node holds the same copy,
// it survives restarts with the rest of the state, and the copy's own
// recently-changed queue feeds the regions= delta.
//
// A copy changes atomically: an update too large for one entry is written
// as staged chunks of one pass, and the copy takes them all with the final
// chunk, so no reader ever sees half a pass. A pass that a leader change
// interrupted is discarded when the next pass (another Pass number) starts.

// RegionUpdateBody changes the copy of one remote region (CmdRegionUpdate).
type RegionUpdateBody struct {
	Region string `codec:"r"`
	// Pass numbers one sync pass; chunks of the same pass are staged until
	// the Final one.
	Pass uint64 `codec:"pa"`
	// Put are records to add or replace, as the remote region serves them
	// (status, lease and action included).
	Put []*Entry `codec:"p,omitempty"`
	// Delete are the instances the remote region no longer has.
	Delete []KeyBody `codec:"d,omitempty"`
	// Final applies the pass: the staged chunks, this one, and Status.
	Final bool `codec:"f,omitempty"`
	// Status, when set on the final chunk, replaces the region's status.
	Status *RegionStatus `codec:"st,omitempty"`
}

// RegionStatus is what the local cluster knows of its copy of a remote
// region. The leader's sync loop writes it; times are the leader's clock.
type RegionStatus struct {
	// Loaded is set once a whole copy of the region was taken.
	Loaded bool `codec:"l"`
	// Reachable is false after a sync pass found no URL of the region
	// answering; the copy then stays as it was (marked, never dropped).
	Reachable bool `codec:"ok"`
	// Kind is "heureka" or "eureka": how the region is followed.
	Kind string `codec:"k,omitempty"`
	// Source is the URL that answered last.
	Source string `codec:"src,omitempty"`
	// SyncedAt is when the copy was last confirmed equal to the region's
	// registry (epoch ms); Since is when Reachable last changed.
	SyncedAt int64 `codec:"at"`
	Since    int64 `codec:"since"`
	// Error is the last failure, while the region is unreachable.
	Error string `codec:"err,omitempty"`
}

// regionCopy is one remote region's copy inside the registry.
type regionCopy struct {
	// reg holds the copy's applications, delta queue and status counts;
	// only its content fields are used.
	reg    *Registry
	status RegionStatus
	// pending is the staged part of pass pendingPass.
	pendingPass uint64
	pendingPut  []*Entry
	pendingDel  []KeyBody
}

// RemoteRegion is a read-only view of one remote region's copy, valid
// under the FSM's read lock like the Registry it comes from.
type RemoteRegion struct {
	Name   string
	Status RegionStatus
	// Copy is the region's registry as copied: read it with the Registry's
	// getters (AppNames, AppEntries, Get, Delta, StatusCounts, Count...).
	Copy *Registry
}

// RemoteRegion returns the copy of region name, and false when this
// registry has never heard of it (no sync pass of it was applied yet).
func (r *Registry) RemoteRegion(name string) (RemoteRegion, bool) {
	rc := r.regions[name]
	if rc == nil {
		return RemoteRegion{}, false
	}
	return RemoteRegion{Name: name, Status: rc.status, Copy: rc.reg}, true
}

// RemoteRegionNames lists the remote regions this registry holds, sorted.
func (r *Registry) RemoteRegionNames() []string {
	out := make([]string, 0, len(r.regions))
	for n := range r.regions {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// regionUpdate applies CmdRegionUpdate. It never fails: a pass is the
// leader's view of the remote region and is taken as it is.
func (r *Registry) regionUpdate(idx uint64, ts int64, b *RegionUpdateBody, c *Change) error {
	if b.Region == "" {
		return fmt.Errorf("%w: region update without a region", ErrBadCommand)
	}
	rc := r.regions[b.Region]
	if rc == nil {
		rc = &regionCopy{reg: newRegistry(r.retentionMs)}
		r.regions[b.Region] = rc
	}
	if rc.pendingPass != b.Pass {
		rc.pendingPass, rc.pendingPut, rc.pendingDel = b.Pass, nil, nil
	}
	if !b.Final {
		rc.pendingPut = append(rc.pendingPut, b.Put...)
		rc.pendingDel = append(rc.pendingDel, b.Delete...)
		return nil
	}
	puts := append(rc.pendingPut, b.Put...)
	dels := append(rc.pendingDel, b.Delete...)
	rc.pendingPass, rc.pendingPut, rc.pendingDel = 0, nil, nil
	c.Region = b.Region
	rc.reg.pruneDelta(ts)
	// A scratch change for recordDelta: its Keys are the copy's, which no
	// observer of local changes (leases, outbound replication) may see.
	var scratch Change
	for _, k := range dels {
		old := rc.reg.remove(k.App, k.ID)
		if old == nil {
			continue
		}
		gone := *old
		gone.ActionType = ActionDeleted
		rc.reg.recordDelta(idx, ts, k.App, k.ID, ActionDeleted, &gone, &scratch)
		touched(c, old.Instance)
	}
	for _, p := range puts {
		if p == nil || p.Instance == nil || p.App == "" || p.ID == "" {
			continue // the leader never writes these; a damaged entry is skipped, not half-applied
		}
		e := *p // put seals a copy of the record; the command's is left as it is
		e.ModifyIndex = idx
		action := ActionAdded
		if old := rc.reg.Get(e.App, e.ID); old != nil {
			action = ActionModified
			touched(c, old.Instance)
		}
		if e.ActionType != ActionAdded && e.ActionType != ActionModified {
			// The record keeps the action the region served it with, as
			// eureka-server's copy does; a record without one gets the
			// copy's own.
			e.ActionType = action
		}
		rc.reg.put(&e)
		rc.reg.recordDelta(idx, ts, e.App, e.ID, action, nil, &scratch)
		touched(c, e.Instance)
	}
	if len(puts)+len(dels) > 0 {
		rc.reg.version = idx
	}
	if b.Status != nil {
		rc.status = *b.Status
	}
	return nil
}

// RegionState is one remote region's copy in a snapshot.
type RegionState struct {
	Name   string       `codec:"n"`
	Status RegionStatus `codec:"st"`
	// Copy is the region's registry (its members, mode and cluster id
	// unused).
	Copy        *State    `codec:"c"`
	PendingPass uint64    `codec:"pp,omitempty"`
	PendingPut  []*Entry  `codec:"ppu,omitempty"`
	PendingDel  []KeyBody `codec:"pd,omitempty"`
}

func (r *Registry) exportRegions() []RegionState {
	if len(r.regions) == 0 {
		return nil
	}
	out := make([]RegionState, 0, len(r.regions))
	for _, name := range r.RemoteRegionNames() {
		rc := r.regions[name]
		// Clipped: a Clone keeps these slices and appends the next
		// chunk to them, which must not land in this registry's array.
		out = append(out, RegionState{Name: name, Status: rc.status, Copy: rc.reg.export(0),
			PendingPass: rc.pendingPass, PendingPut: slices.Clip(rc.pendingPut), PendingDel: slices.Clip(rc.pendingDel)})
	}
	return out
}

func (r *Registry) importRegions(states []RegionState, held bool) {
	for _, rs := range states {
		cp := rs.Copy
		if cp == nil {
			cp = &State{}
		}
		r.regions[rs.Name] = &regionCopy{reg: importState(cp, r.retentionMs, held), status: rs.Status,
			pendingPass: rs.PendingPass, pendingPut: rs.PendingPut, pendingDel: rs.PendingDel}
	}
}

// checkRegions is State.check for the remote regions' copies.
func (st *State) checkRegions() error {
	seen := map[string]bool{}
	for _, rs := range st.Regions {
		if rs.Name == "" {
			return fmt.Errorf("a remote region without a name")
		}
		if seen[rs.Name] {
			return fmt.Errorf("remote region %s appears twice", rs.Name)
		}
		seen[rs.Name] = true
		if rs.Copy == nil {
			continue
		}
		if len(rs.Copy.Regions) > 0 {
			return fmt.Errorf("remote region %s holds remote regions of its own", rs.Name)
		}
		if err := rs.Copy.check(); err != nil {
			return fmt.Errorf("remote region %s: %w", rs.Name, err)
		}
	}
	return nil
}

// SameRecord reports whether two records of one instance hold the same
// registration: the instance as registered, its status and the lease
// times a change moves. The last renewal is left out (a renewal is not a
// change: the remote region's delta does not list it), and so are the
// fields the copy sets itself (ModifyIndex, ActionType).
func SameRecord(a, b *Entry) bool {
	if a == nil || b == nil || a.Instance == nil || b.Instance == nil {
		return a == b
	}
	if a.App != b.App || a.ID != b.ID || a.Override != b.Override || a.RegistrationTs != b.RegistrationTs ||
		a.EvictionTs != b.EvictionTs || a.ServiceUpTs != b.ServiceUpTs || a.LastUpdatedTs != b.LastUpdatedTs {
		return false
	}
	var ba, bb bytes.Buffer
	if codec.NewEncoder(&ba, msgpackHandle).Encode(a.Instance) != nil || codec.NewEncoder(&bb, msgpackHandle).Encode(b.Instance) != nil {
		return false
	}
	return bytes.Equal(ba.Bytes(), bb.Bytes())
}
