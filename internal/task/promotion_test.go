package task

import (
	"testing"
	"time"

	"github.com/triagehq/triage/triagetype"
)

// The steps keep the newest MaxPromotions (their stored form is
// internal/store's TestTaskItemNames).
func TestAddPromotionKeepsTheNewestSteps(t *testing.T) {
	at := time.Date(2026, 11, 26, 10, 0, 0, 500_000_000, time.UTC)
	tk := &Task{}
	steps := []struct{ from, to triagetype.Priority }{{triagetype.Low, triagetype.Medium}, {triagetype.Medium, triagetype.High}, {triagetype.Low, triagetype.Medium}, {triagetype.Medium, triagetype.High}, {triagetype.Low, triagetype.Medium}}
	for i, s := range steps {
		tk.AddPromotion(s.from, s.to, at.Add(time.Duration(i)*time.Minute), time.Duration(i+1)*time.Minute)
	}
	if len(tk.Promotions) != MaxPromotions {
		t.Fatalf("kept %d steps, want %d", len(tk.Promotions), MaxPromotions)
	}
	first := tk.Promotions[0]
	if first.From != triagetype.Medium || first.To != triagetype.High || first.WaitedMS != 120_000 || !first.At.Equal(at.Add(time.Minute).Truncate(time.Second)) {
		t.Fatalf("oldest kept step %+v, want the second one added", first)
	}
}
