package fsm

import "fmt"

// cmdSpec is everything the FSM knows about one command type, so that
// decoding, naming and applying a command read from one table.
type cmdSpec struct {
	name string
	// newBody returns the value the msgpack body decodes into.
	newBody func() any
	// content is set for commands that change registry content: they
	// advance the delta queue's clock (pruneDelta) before applying.
	content bool
	// ticks is set for a command that changes no content but advances the
	// delta queue's clock all the same: renewal batches, the only entries
	// a settled registry writes. Without them a fleet that registered and
	// then only renewed kept every change of its registration in the
	// queue, long past the retention: at a million, 90 MB on every node.
	ticks bool
	// onInstance is set for commands that require their instance to exist
	// (see InstanceKey).
	onInstance bool
	// apply applies a decoded command of this type to r.
	apply func(r *Registry, idx uint64, cmd Command, c *Change) error
}

// registeredAgain refuses a command made on an instance's registration at
// (RegisteredAt, set by a node that journaled it while cut off) once the
// instance was registered again after the command was acknowledged
// (journaledAt; 0: registered again at any time): the newer registration
// stands. A registration made before it, which the cut-off node did not
// see, takes the command, as real-time order has it. at == 0: no
// condition.
func registeredAgain(r *Registry, what, app, id string, at, journaledAt int64) error {
	e := r.Get(app, id)
	if e == nil || at == 0 || e.RegistrationTs == at {
		return nil
	}
	if journaledAt != 0 && e.RegistrationTs < journaledAt {
		return nil
	}
	return fmt.Errorf("%s of %s/%s registered at %d: registered again at %d: %w",
		what, app, id, at, e.RegistrationTs, ErrInstanceNotFound)
}

// commands is the command table, keyed by type without CmdIgnoreUnknown.
var commands = map[CmdType]cmdSpec{
	CmdRegister: {name: "register", newBody: func() any { return &RegisterBody{} }, content: true,
		apply: func(r *Registry, idx uint64, cmd Command, c *Change) error {
			b := cmd.Body.(*RegisterBody)
			// The HTTP edge refuses these names; an entry that carries
			// one anyway must not give a registry its own snapshot
			// check refuses (checkEntry).
			if b.Instance.App == "" || b.Instance.ID() == "" {
				return fmt.Errorf("%w: register without an application name or instance id", ErrBadCommand)
			}
			c.Replicated = b.Replicated
			r.register(idx, cmd.Ts, b.Instance, b.Replicated, c)
			return nil
		}},
	CmdCancel: {name: "cancel", newBody: func() any { return &KeyBody{} }, content: true, onInstance: true,
		apply: func(r *Registry, idx uint64, cmd Command, c *Change) error {
			b := cmd.Body.(*KeyBody)
			c.Replicated = b.Replicated
			if err := registeredAgain(r, "cancel", b.App, b.ID, b.RegisteredAt, b.JournaledAt); err != nil {
				return err
			}
			return r.cancel(idx, cmd.Ts, b.App, b.ID, c)
		}},
	CmdRenewBatch: {name: "renew_batch", newBody: func() any { return &RenewBatchBody{} }, ticks: true,
		apply: func(r *Registry, _ uint64, cmd Command, _ *Change) error {
			r.renew(cmd.Body.(*RenewBatchBody).Renewals)
			return nil
		}},
	CmdSetOverride: {name: "set_override", newBody: func() any { return &OverrideBody{} }, content: true, onInstance: true,
		apply: func(r *Registry, idx uint64, cmd Command, c *Change) error {
			b := cmd.Body.(*OverrideBody)
			c.Replicated = b.Replicated
			if err := registeredAgain(r, "status override", b.App, b.ID, b.RegisteredAt, b.JournaledAt); err != nil {
				return err
			}
			return r.setOverride(idx, cmd.Ts, b, c)
		}},
	CmdDeleteOverride: {name: "delete_override", newBody: func() any { return &OverrideBody{} }, content: true, onInstance: true,
		apply: func(r *Registry, idx uint64, cmd Command, c *Change) error {
			b := cmd.Body.(*OverrideBody)
			c.Replicated = b.Replicated
			if err := registeredAgain(r, "override removal", b.App, b.ID, b.RegisteredAt, b.JournaledAt); err != nil {
				return err
			}
			return r.deleteOverride(idx, cmd.Ts, b, c)
		}},
	CmdMetadata: {name: "metadata", newBody: func() any { return &MetadataBody{} }, content: true, onInstance: true,
		apply: func(r *Registry, idx uint64, cmd Command, c *Change) error {
			b := cmd.Body.(*MetadataBody)
			if err := registeredAgain(r, "metadata update", b.App, b.ID, b.RegisteredAt, b.JournaledAt); err != nil {
				return err
			}
			return r.updateMetadata(idx, cmd.Ts, b, c)
		}},
	CmdEvict: {name: "evict", newBody: func() any { return &EvictBody{} }, content: true,
		apply: func(r *Registry, idx uint64, cmd Command, c *Change) error {
			for _, k := range cmd.Body.(*EvictBody).Keys {
				_ = r.cancel(idx, cmd.Ts, k.App, k.ID, c) // already gone: nothing to evict
			}
			return nil
		}},
	CmdEvictLeases: {name: "evict_leases", newBody: func() any { return &EvictLeasesBody{} }, content: true,
		apply: func(r *Registry, idx uint64, cmd Command, c *Change) error {
			return r.evictLeases(idx, cmd.Ts, cmd.Body.(*EvictLeasesBody).Leases, c)
		}},
	CmdSetMember: {name: "set_member", newBody: func() any { return &Member{} },
		apply: func(r *Registry, _ uint64, cmd Command, _ *Change) error {
			r.setMember(*cmd.Body.(*Member))
			return nil
		}},
	CmdRemoveMember: {name: "remove_member", newBody: func() any { return &KeyBody{} },
		apply: func(r *Registry, _ uint64, cmd Command, _ *Change) error {
			r.removeMember(cmd.Body.(*KeyBody).ID)
			return nil
		}},
	CmdSetClusterID: {name: "set_cluster_id", newBody: func() any { return &ClusterIDBody{} },
		apply: func(r *Registry, _ uint64, cmd Command, _ *Change) error {
			r.setClusterID(cmd.Body.(*ClusterIDBody).ID)
			return nil
		}},
	CmdRegionUpdate: {name: "region_update", newBody: func() any { return &RegionUpdateBody{} },
		apply: func(r *Registry, idx uint64, cmd Command, c *Change) error {
			return r.regionUpdate(idx, cmd.Ts, cmd.Body.(*RegionUpdateBody), c)
		}},
	CmdSetMode: {name: "set_mode", newBody: func() any { return &ModeBody{} },
		apply: func(r *Registry, _ uint64, cmd Command, _ *Change) error {
			if b := cmd.Body.(*ModeBody); !b.IfUnset || r.mode == "" {
				r.setMode(b.Mode)
			}
			return nil
		}},
}
