package triagetype

import "time"

// Schedule is a periodic task: every time its cron expression fires in its
// time zone, one task made from Task is enqueued. It is the body of POST
// /api/v1/schedules (which creates or replaces the schedule of that name)
// and what GET /api/v1/schedules/{name} returns; the fields under "read
// only" are the server's and are ignored in a request.
type Schedule struct {
	// Name identifies the schedule: 1 to 128 characters of letters,
	// digits, '.', '_' and '-'.
	Name string `json:"name"`
	// Cron is a 5-field expression: minute hour day-of-month month
	// day-of-week ("0 2 * * *" is 02:00 every day).
	Cron string `json:"cron"`
	// Timezone is an IANA zone name ("Europe/Berlin"); empty is UTC.
	Timezone string `json:"timezone,omitempty"`
	// Task is the task each tick enqueues. run_at, delay_seconds and
	// idempotency_key are refused: a tick's time and key are its own.
	Task SubmitRequest `json:"task"`
	// Paused schedules enqueue nothing; resuming one starts at the next
	// tick after the resume.
	Paused bool `json:"paused"`
	// Missed is what happens to ticks missed by more than the grace
	// period (the promoter was down or behind): "skip" (the default) or
	// "catch_up", which enqueues the most recent CatchUpLimit of them.
	Missed string `json:"missed,omitempty"`
	// CatchUpLimit bounds the missed ticks catch_up enqueues (default 10,
	// at most 100).
	CatchUpLimit int `json:"catch_up_limit,omitempty"`
	// DSTGap is what a wall-clock schedule does with a time a
	// spring-forward transition skips: "run" it shifted forward by the gap
	// (the default) or "skip" it.
	DSTGap string `json:"dst_gap,omitempty"`

	// Read only.

	// NextTick is the next time the schedule fires (absent when paused).
	NextTick *time.Time `json:"next_tick,omitempty"`
	// LastTick is the last tick handled, and LastTaskID the task it made.
	LastTick   *time.Time `json:"last_tick,omitempty"`
	LastTaskID string     `json:"last_task_id,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
}

// SchedulePage is one page of GET /api/v1/schedules, by name; Cursor
// fetches the next page and is empty on the last.
type SchedulePage struct {
	Schedules []Schedule `json:"schedules"`
	Cursor    string     `json:"cursor,omitempty"`
}
