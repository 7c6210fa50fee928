package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Maintenance mode is Queen MQ's switch for servicing the database
// (GET/POST /api/v1/system/maintenance and …/maintenance/pop), mapped so
// that no message is lost or hidden: Queen's push scope writes pushes to
// files meanwhile; here pushes are stored in the database as ever, and
// what either scope does is hold every delivery. While a scope is on no
// pop hands anything out (a long-poll waits, and is served once both are
// off); leases handed out before stay valid and their acks work; no
// retry is spent and no retry delay cut short. It is kept in the
// settings (one row), so it survives a restart and holds for every
// process of a store shared by several, and changes are audited. It is not
// the background maintenance of Maintain.
//
// A pop reads it through the lookup cache: with both scopes known off
// (the common case) a pop reads nothing more; while one is on, each pop
// reads the setting, so that turning it off anywhere is seen at once.
// Another process learns of a change through the cache generation
// (migrations_pg/0007 moves it when the setting changes).

// MaintenanceScope names one of the two switches.
type MaintenanceScope string

// The scopes of maintenance mode.
const (
	// MaintenancePush is Queen's maintenance mode (its pushes go to
	// files): here pushes are stored as usual and pops deliver nothing.
	MaintenancePush MaintenanceScope = "push"
	// MaintenancePop is Queen's pop maintenance mode: pops deliver
	// nothing, pushes are stored as usual.
	MaintenancePop MaintenanceScope = "pop"
)

// AuditMaintenance is the audit action of SetMaintenance.
const AuditMaintenance = "maintenance"

// maintenanceKey is the setting that keeps both scopes (JSON).
const maintenanceKey = "maintenance"

// maintenanceNews wakes the pops waiting while deliveries were held,
// once they are no longer (a key no queue name can be: names are
// checked).
const maintenanceNews = "\x00maintenance"

// MaintenanceState is one scope's switch and its last change.
type MaintenanceState struct {
	On bool
	// By and Since: who turned it on or off last, and when (empty and
	// zero when it was never turned on).
	By    string
	Since time.Time
	// mark is the highest message seq when the push scope was turned on:
	// the messages above it were pushed while it was on.
	mark int64
}

// MaintenanceMode is the state of both scopes.
type MaintenanceMode struct {
	Push, Pop MaintenanceState
}

// Holds reports whether deliveries are held: either scope is on.
func (m MaintenanceMode) Holds() bool { return m.Push.On || m.Pop.On }

func (m *MaintenanceMode) scope(s MaintenanceScope) *MaintenanceState {
	if s == MaintenancePop {
		return &m.Pop
	}
	return &m.Push
}

// MaintenanceStatus is the maintenance mode with what it holds.
type MaintenanceStatus struct {
	MaintenanceMode
	// Buffered counts the messages pushed since the push scope was
	// turned on (those with a seq above the highest one then), while it
	// is on: none of them has been delivered, since nothing is. 0 while
	// it is off: nothing is held back then.
	Buffered int64
}

// MaintenanceTx is what maintenance mode needs from storage besides its
// setting (UserTx.Setting).
type MaintenanceTx interface {
	// TopSeq returns the highest seq of the messages table (0: none), by
	// its primary key; every message pushed later has a higher one.
	TopSeq(ctx context.Context) (int64, error)
	// CountMessagesAfter counts the messages whose seq is above seq, by
	// the primary key's range (a row a store keeps to keep seqs growing
	// is not a message: not counted).
	CountMessagesAfter(ctx context.Context, seq int64) (int64, error)
}

// maintenanceJSON is the setting's form.
type maintenanceJSON struct {
	Push scopeJSON `json:"push"`
	Pop  scopeJSON `json:"pop"`
}

type scopeJSON struct {
	On    bool   `json:"on"`
	By    string `json:"by,omitempty"`
	Since int64  `json:"since,omitempty"` // Unix ms
	Mark  int64  `json:"mark,omitempty"`
}

func (s scopeJSON) state() MaintenanceState {
	st := MaintenanceState{On: s.On, By: s.By, mark: s.Mark}
	if s.Since != 0 {
		st.Since = time.UnixMilli(s.Since).UTC()
	}
	return st
}

func scopeOfState(s MaintenanceState) scopeJSON {
	j := scopeJSON{On: s.On, By: s.By, Mark: s.mark}
	if !s.Since.IsZero() {
		j.Since = s.Since.UnixMilli()
	}
	return j
}

// readMaintenance reads the setting (none: both scopes off).
func readMaintenance(ctx context.Context, tx UserTx) (MaintenanceMode, error) {
	v, err := tx.Setting(ctx, maintenanceKey)
	if isNotFound(err) {
		return MaintenanceMode{}, nil
	}
	if err != nil {
		return MaintenanceMode{}, fmt.Errorf("maintenance mode: %w", err)
	}
	var j maintenanceJSON
	if err := json.Unmarshal([]byte(v), &j); err != nil {
		return MaintenanceMode{}, fmt.Errorf("maintenance mode: the setting is not what Lazarus writes: %w", err)
	}
	return MaintenanceMode{Push: j.Push.state(), Pop: j.Pop.state()}, nil
}

// deliveriesHeld reports whether maintenance mode holds the deliveries
// of a write transaction of the broker's: through the lookup cache when
// tx is one of updateStats (no statement while both scopes are known
// off), else from the setting.
func deliveriesHeld(ctx context.Context, tx UserTx) (bool, error) {
	if s, ok := tx.(*statsTx); ok {
		if c, ok := s.Tx.(*cacheTx); ok {
			return c.deliveriesHeld(ctx)
		}
	}
	m, err := readMaintenance(ctx, tx)
	return m.Holds(), err
}

// Maintenance reads the maintenance mode of both scopes (one read of
// the settings, never the cache: another process may have changed it).
func (b *Broker) Maintenance(ctx context.Context) (MaintenanceMode, error) {
	var m MaintenanceMode
	err := b.store.View(ctx, func(tx Tx) error {
		var err error
		m, err = readMaintenance(ctx, tx)
		return err
	})
	return m, err
}

// MaintenanceStatus reads the maintenance mode and, while the push scope
// is on, counts the messages pushed since (by the messages' primary key:
// a read as long as those messages are many).
func (b *Broker) MaintenanceStatus(ctx context.Context) (MaintenanceStatus, error) {
	var r MaintenanceStatus
	err := b.store.View(ctx, func(tx Tx) error {
		m, err := readMaintenance(ctx, tx)
		if err != nil {
			return err
		}
		r = MaintenanceStatus{MaintenanceMode: m}
		if m.Push.On {
			if r.Buffered, err = tx.CountMessagesAfter(ctx, m.Push.mark); err != nil {
				return fmt.Errorf("maintenance mode: messages pushed since: %w", err)
			}
		}
		return nil
	})
	return r, err
}

// SetMaintenance turns a scope of maintenance mode on or off, for by (an
// operator), audited, and returns the mode as it is then. A scope
// already so changes nothing (no audit entry). Once neither scope is on,
// the pops waiting, in every process, are woken and served.
func (b *Broker) SetMaintenance(ctx context.Context, scope MaintenanceScope, on bool, by string) (MaintenanceMode, error) {
	if scope != MaintenancePush && scope != MaintenancePop {
		return MaintenanceMode{}, errorf(ErrInvalid, "maintenance scope must be push or pop")
	}
	var m MaintenanceMode
	err := b.update(ctx, func(tx Tx, touched func(string)) error {
		now := b.now()
		var err error
		if m, err = readMaintenance(ctx, tx); err != nil {
			return err
		}
		s := m.scope(scope)
		if s.On == on {
			return nil
		}
		held := m.Holds()
		var count int64
		mark := s.mark
		switch {
		case on && scope == MaintenancePush:
			if mark, err = tx.TopSeq(ctx); err != nil {
				return fmt.Errorf("maintenance mode: top seq: %w", err)
			}
		case scope == MaintenancePush:
			if count, err = tx.CountMessagesAfter(ctx, mark); err != nil {
				return fmt.Errorf("maintenance mode: messages pushed since: %w", err)
			}
		}
		*s = MaintenanceState{On: on, By: by, Since: now, mark: mark}
		v, err := json.Marshal(maintenanceJSON{Push: scopeOfState(m.Push), Pop: scopeOfState(m.Pop)})
		if err != nil {
			return err
		}
		if err := tx.SetSetting(ctx, maintenanceKey, string(v)); err != nil {
			return fmt.Errorf("maintenance mode: %w", err)
		}
		if err := audit(ctx, tx, now, by, AuditMaintenance, "", "", int(count), maintenanceDetail(scope, on, count)); err != nil {
			return err
		}
		if held && !m.Holds() {
			touched(maintenanceNews)
		}
		// The cache knows whether deliveries are held.
		return b.invalidateCache(tx)
	})
	return m, err
}

func maintenanceDetail(scope MaintenanceScope, on bool, count int64) string {
	switch {
	case on && scope == MaintenancePush:
		return "push maintenance mode on: pushes are stored, pops deliver nothing until it is off"
	case on:
		return "pop maintenance mode on: pops deliver nothing until it is off"
	case scope == MaintenancePush:
		return fmt.Sprintf("push maintenance mode off: %d messages pushed while it was on", count)
	default:
		return "pop maintenance mode off"
	}
}
