package direct

import (
	"context"

	"github.com/triagehq/triage"
)

// The schedule calls go through schedule.Service, as the API's do, so
// both transports give the same answers.

var _ triage.Transport = (*Transport)(nil)

// PutSchedule implements triage.Transport.
func (d *Transport) PutSchedule(ctx context.Context, s triage.Schedule) (*triage.Schedule, bool, error) {
	sc, created, err := d.schedules.Put(ctx, s)
	if err != nil {
		return nil, false, err
	}
	return sc, created, nil
}

// GetSchedule implements triage.Transport.
func (d *Transport) GetSchedule(ctx context.Context, name string) (*triage.Schedule, error) {
	sc, err := d.schedules.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	return sc, nil
}

// ListSchedules implements triage.Transport.
func (d *Transport) ListSchedules(ctx context.Context, limit int, cursor string) (*triage.SchedulePage, error) {
	p, err := d.schedules.List(ctx, limit, cursor)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// DeleteSchedule implements triage.Transport.
func (d *Transport) DeleteSchedule(ctx context.Context, name string) error {
	return d.schedules.Delete(ctx, name)
}

// SetSchedulePaused implements triage.Transport.
func (d *Transport) SetSchedulePaused(ctx context.Context, name string, paused bool) (*triage.Schedule, error) {
	sc, err := d.schedules.SetPaused(ctx, name, paused)
	if err != nil {
		return nil, err
	}
	return sc, nil
}
