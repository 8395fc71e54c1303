package flow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// RecordOnly runs a workflow submit up to its commit and stops there, as
// an API process killed between writing the nodes and the commit would:
// it returns the workflow id.
func (f *Flow) RecordOnly(ctx context.Context, r *triagetype.WorkflowRequest) (string, error) {
	p, err := validate(r, task.KnownTypes{})
	if err != nil {
		return "", err
	}
	body, _ := json.Marshal(r)
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:16])
	now := f.store.Now().UTC()
	id := task.NewID(now)
	fresh := true
	if r.IdempotencyKey != "" {
		owner, _, err := f.store.ClaimWorkflowKey(ctx, r.IdempotencyKey, id, hash)
		if err != nil {
			return "", err
		}
		id, fresh = owner, owner == id
	}
	return id, f.record(ctx, id, r, p, hash, now, fresh)
}
