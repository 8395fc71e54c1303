package task

import (
	"time"

	"github.com/triagehq/triage/triagetype"
)

// MaxPromotions caps the promotion steps kept on a task. A task's wait
// takes at most two (low → medium → high); a retried task starts again at
// its original priority and may take two more. At about 36 bytes a step
// (short names, times in Unix seconds), the list adds at most ~160 bytes
// to the record.
const MaxPromotions = 4

// AddPromotion records that t moved from one priority to another at at,
// after waiting waited at from, keeping the newest MaxPromotions steps.
// The caller writes it in the update that promotes the task, so the
// record costs no write of its own.
func (t *Task) AddPromotion(from, to triagetype.Priority, at time.Time, waited time.Duration) {
	t.Promotions = append(t.Promotions, triagetype.Promotion{From: from, To: to, At: at.UTC().Truncate(time.Second), WaitedMS: waited.Milliseconds()})
	if n := len(t.Promotions); n > MaxPromotions {
		t.Promotions = append([]triagetype.Promotion(nil), t.Promotions[n-MaxPromotions:]...)
	}
}
