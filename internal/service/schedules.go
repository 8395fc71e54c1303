package service

import (
	"context"

	"github.com/triagehq/triage/internal/fault"
	"github.com/triagehq/triage/internal/schedule"
	"github.com/triagehq/triage/triagetype"
)

// The schedule operations are schedule.Service's, which holds their
// rules; without one, they answer ErrNotImplemented.

func (s *Service) scheduleService() (*schedule.Service, error) {
	if s.schedules == nil {
		return nil, fault.NotImplemented("this server keeps no schedules")
	}
	return s.schedules, nil
}

// PutSchedule creates (created true) or replaces the schedule sc names.
func (s *Service) PutSchedule(ctx context.Context, sc triagetype.Schedule) (*triagetype.Schedule, bool, error) {
	ss, err := s.scheduleService()
	if err != nil {
		return nil, false, err
	}
	return ss.Put(ctx, sc)
}

// GetSchedule reads schedule name.
func (s *Service) GetSchedule(ctx context.Context, name string) (*triagetype.Schedule, error) {
	ss, err := s.scheduleService()
	if err != nil {
		return nil, err
	}
	return ss.Get(ctx, name)
}

// ListSchedules reads up to limit (0: 100) schedules by name after cursor.
func (s *Service) ListSchedules(ctx context.Context, limit int, cursor string) (*triagetype.SchedulePage, error) {
	ss, err := s.scheduleService()
	if err != nil {
		return nil, err
	}
	return ss.List(ctx, limit, cursor)
}

// DeleteSchedule removes schedule name; the tasks it made stay.
func (s *Service) DeleteSchedule(ctx context.Context, name string) error {
	ss, err := s.scheduleService()
	if err != nil {
		return err
	}
	return ss.Delete(ctx, name)
}

// SetSchedulePaused pauses or resumes schedule name.
func (s *Service) SetSchedulePaused(ctx context.Context, name string, paused bool) (*triagetype.Schedule, error) {
	ss, err := s.scheduleService()
	if err != nil {
		return nil, err
	}
	return ss.SetPaused(ctx, name, paused)
}
