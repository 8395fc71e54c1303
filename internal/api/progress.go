package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/triagehq/triage/internal/fault"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// MaxProgressBody bounds a progress report: a checkpoint, a message and a
// few bytes of JSON around them.
const MaxProgressBody = task.MaxCheckpointBytes + task.MaxProgressMessageBytes + 1<<10

// ProgressAck is the answer to an accepted progress report.
type ProgressAck struct {
	ID      string `json:"id"`
	Attempt int    `json:"attempt"`
	// Progress is the task's progress now; CheckpointSaved says whether the
	// report's checkpoint was written.
	Progress        *triagetype.Progress `json:"progress,omitempty"`
	CheckpointSaved bool                 `json:"checkpoint_saved"`
	// NextAfter is the earliest time the next report will be accepted.
	NextAfter time.Time `json:"next_after"`
}

// progressToken reads the attempt token from "Authorization: Bearer <t>".
// It is the attempt's own credential, not an API token: the route takes no
// scope, and the token authorizes reports for one task and one attempt.
func progressToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != "" && len(tok) <= 128
}

// reportProgress serves POST /api/v1/tasks/{id}/progress: an external
// handler's report, authorized by the progress_token its attempt's request
// carried. The store checks the token against the running attempt and
// writes at most one report per task per ProgressInterval (429 sooner).
func (s *Server) reportProgress(w http.ResponseWriter, r *http.Request) {
	id, ok := taskID(w, r)
	if !ok {
		return
	}
	tok, ok := progressToken(r)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="triage-progress"`)
		writeError(w, http.StatusUnauthorized, triagetype.CodeUnauthorized, "", "missing progress token: send the attempt's progress_token as Authorization: Bearer <token>")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxProgressBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeError(w, http.StatusRequestEntityTooLarge, triagetype.CodeTooLarge, "", fmt.Sprintf("a progress report is at most %d bytes (a checkpoint at most %d)", MaxProgressBody, task.MaxCheckpointBytes))
		return
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, triagetype.CodeBadRequest, "", "could not read the request body: "+err.Error())
		return
	}
	var rep triagetype.ProgressReport
	if err := DecodeStrict(body, &rep); err != nil {
		var fe *task.FieldError
		if errors.As(err, &fe) {
			writeError(w, http.StatusBadRequest, triagetype.CodeInvalidField, fe.Field, fe.Error())
		} else {
			writeError(w, http.StatusBadRequest, triagetype.CodeInvalidJSON, "", err.Error())
		}
		return
	}
	if fe := checkReport(rep); fe != nil {
		e := fe.APIError("")
		writeError(w, e.Status, e.Code, e.Field, e.Message)
		return
	}
	sr := store.Report{Token: tok, Checkpoint: rep.Checkpoint}
	if rep.Percent != nil {
		sr.Progress = &task.Progress{Percent: *rep.Percent, Message: rep.Message}
	}
	t, err := s.store.Report(r.Context(), id, sr, s.opt.ProgressInterval)
	var soon *store.TooSoonError
	switch {
	case errors.Is(err, store.ErrBadToken):
		writeError(w, http.StatusForbidden, triagetype.CodeForbidden, "", "the progress token is not that of task "+id+"'s running attempt (it is wrong, or its attempt has ended)")
		return
	case errors.As(err, &soon):
		w.Header().Set("Retry-After", strconv.Itoa(int(max((soon.Wait+time.Second-1)/time.Second, 1))))
		writeError(w, http.StatusTooManyRequests, triagetype.CodeRateLimited, "", soon.Error())
		return
	case err != nil:
		s.fail(w, r, fault.Internal("report progress of task "+id, err))
		return
	}
	ack := ProgressAck{ID: t.ID, Attempt: t.Attempts, Progress: t.Progress, CheckpointSaved: rep.Checkpoint != nil}
	if t.ReportedAt != nil {
		ack.NextAfter = t.ReportedAt.Add(s.opt.ProgressInterval)
	}
	writeJSON(w, http.StatusOK, ack)
}

// checkReport validates a report's fields, naming the one at fault.
func checkReport(rep triagetype.ProgressReport) *task.FieldError {
	if rep.Percent == nil && rep.Checkpoint == nil {
		if rep.Message != "" {
			return &task.FieldError{Field: "percent", Message: "is required with message"}
		}
		return &task.FieldError{Field: "percent", Message: "give percent (0 to 100), checkpoint, or both"}
	}
	if rep.Percent != nil {
		if fe := task.CheckProgress(*rep.Percent, rep.Message); fe != nil {
			return fe
		}
	} else if rep.Message != "" {
		return &task.FieldError{Field: "percent", Message: "is required with message"}
	}
	if rep.Checkpoint != nil {
		return task.CheckCheckpoint(rep.Checkpoint)
	}
	return nil
}
