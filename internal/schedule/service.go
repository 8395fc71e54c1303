package schedule

import (
	"context"
	"errors"
	"fmt"

	"github.com/triagehq/triage/internal/fault"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Service is the one way schedules are read and written from outside the
// promoter: the HTTP API and the direct transport both call it, so a
// request gets the same answer (kind, code, field) either way. Every
// error it returns is a *fault.Error; an internal one's Cause keeps the
// underlying error for the caller's log.
type Service struct {
	store *Store
	known task.KnownTypes
}

// NewService returns the service over s; known, when not empty, are the
// only task types a schedule may enqueue (TRIAGE_TYPES).
func NewService(s *Store, known []string) *Service {
	return &Service{store: s, known: task.NewKnownTypes(known)}
}

// Put creates (created true) or replaces the schedule sc names. A field
// that breaks its rule is ErrBadRequest naming it; a new schedule when
// MaxSchedules exist is ErrConflict (limit_reached).
func (s *Service) Put(ctx context.Context, sc Schedule) (*Schedule, bool, error) {
	c, err := Validate(&sc, s.known)
	if err != nil {
		return nil, false, refusal("", err)
	}
	got, created, err := s.store.Put(ctx, sc, c)
	if err != nil {
		return nil, false, refusal(sc.Name, err)
	}
	return got.Public(), created, nil
}

// Get returns one schedule (ErrNotFound if there is none).
func (s *Service) Get(ctx context.Context, name string) (*Schedule, error) {
	if fe := CheckName(name); fe != nil {
		return nil, fe.Fault("")
	}
	got, err := s.store.Get(ctx, name)
	if err != nil {
		return nil, refusal(name, err)
	}
	return got.Public(), nil
}

// List returns a page of schedules by name: limit 1 to 100 (0: 100).
func (s *Service) List(ctx context.Context, limit int, cursor string) (*triagetype.SchedulePage, error) {
	if limit < 0 || limit > 100 {
		return nil, fault.Invalid("limit", "must be between 1 and 100")
	}
	if limit == 0 {
		limit = 100
	}
	if cursor != "" {
		if fe := CheckName(cursor); fe != nil {
			return nil, fault.Invalid("cursor", "not a cursor this listing issued")
		}
	}
	list, next, err := s.store.List(ctx, limit, cursor)
	if err != nil {
		return nil, refusal("", err)
	}
	if list == nil {
		list = []Schedule{}
	}
	return &triagetype.SchedulePage{Schedules: list, Cursor: next}, nil
}

// Delete removes a schedule (ErrNotFound if there is none). Tasks its ticks made
// are left alone.
func (s *Service) Delete(ctx context.Context, name string) error {
	if fe := CheckName(name); fe != nil {
		return fe.Fault("")
	}
	if err := s.store.Delete(ctx, name); err != nil {
		return refusal(name, err)
	}
	return nil
}

// SetPaused pauses or resumes a schedule (ErrNotFound if there is none).
func (s *Service) SetPaused(ctx context.Context, name string, paused bool) (*Schedule, error) {
	if fe := CheckName(name); fe != nil {
		return nil, fe.Fault("")
	}
	got, err := s.store.SetPaused(ctx, name, paused)
	if err != nil {
		return nil, refusal(name, err)
	}
	return got.Public(), nil
}

// refusal is the API's answer to err.
func refusal(name string, err error) *fault.Error {
	var fe *task.FieldError
	switch {
	case errors.As(err, &fe):
		return fe.Fault("")
	case errors.Is(err, ErrNotFound):
		return fault.NotFound("name", fmt.Sprintf("no schedule named %q", name))
	case errors.Is(err, ErrFull):
		return &fault.Error{Kind: triagetype.ErrConflict, Code: triagetype.CodeLimitReached, Field: "name", Message: fmt.Sprintf("%d schedules exist, the most a deployment may have; delete one first", MaxSchedules)}
	case errors.Is(err, ErrConflict):
		return fault.Conflict("", "the schedule changed while this request ran; try again", err)
	}
	return fault.Internal("schedule request", err)
}
