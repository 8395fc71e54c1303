package triagetype

import "time"

// The states of a cleanup.
const (
	CleanupRunning = "running"
	CleanupDone    = "done"
)

// Cleanup is a cleanup job: the deletion of every task that finished
// (completed, cancelled or dead-lettered) before OlderThan, with the DLQ
// copies of the dead ones. DELETE /api/v1/tasks?older_than= starts one and
// answers 202 with it at once; the promoter does the work, page by page,
// and GET /api/v1/cleanups/{id} shows how far it has got. One runs at a
// time.
type Cleanup struct {
	ID        string    `json:"id"`
	OlderThan time.Time `json:"older_than"`
	State     string    `json:"state"`   // CleanupRunning or CleanupDone
	Deleted   int64     `json:"deleted"` // tasks deleted so far
	// Read counts the tasks read to find them: near Deleted when most
	// tasks created before the cut have finished.
	Read int64 `json:"read"`
	// Errors counts pages that failed and were tried again; LastError is
	// the latest one's.
	Errors    int64      `json:"errors"`
	LastError string     `json:"last_error,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	DoneAt    *time.Time `json:"done_at,omitempty"`
}
