package direct

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/triagehq/triage"
	"github.com/triagehq/triage/internal/flow"
	"github.com/triagehq/triage/internal/store"
	"github.com/triagehq/triage/triagetype"
)

var _ triage.Transport = (*Transport)(nil)

// SubmitWorkflow implements triage.Transport as POST /workflows
// does.
func (d *Transport) SubmitWorkflow(ctx context.Context, r triage.WorkflowRequest) (*triage.Workflow, bool, error) {
	out, err := d.flow.SubmitWorkflow(ctx, &r, d.known)
	var we *flow.WorkflowError
	switch {
	case errors.As(err, &we):
		return nil, false, we.APIError()
	case errors.Is(err, flow.ErrKeyReused):
		return nil, false, &triage.Error{Status: http.StatusConflict, Code: triagetype.CodeConflict, Field: "idempotency_key", Message: "idempotency_key: " + err.Error()}
	case err != nil:
		return nil, false, internal("submit workflow", err)
	}
	return out.Workflow, out.Created, nil
}

// Workflow implements triage.Transport as GET /workflows/{id} does.
func (d *Transport) Workflow(ctx context.Context, id string) (*triage.Workflow, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	w, err := d.flow.Workflow(ctx, id)
	if errors.Is(err, store.ErrBatchNotFound) {
		return nil, &triage.Error{Status: http.StatusNotFound, Code: triagetype.CodeNotFound, Field: "id", Message: fmt.Sprintf("no workflow with id %q", id)}
	}
	if err != nil {
		return nil, internal("read workflow", err)
	}
	return w, nil
}
