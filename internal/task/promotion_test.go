package task

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/triagehq/triage/triagetype"
)

// The steps keep the newest MaxPromotions, round-trip through the item
// form (At in Unix seconds, short names) and stay as small as documented.
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
	av, err := attributevalue.Marshal(tk.Promotions)
	if err != nil {
		t.Fatal(err)
	}
	l := av.(*types.AttributeValueMemberL)
	m := l.Value[0].(*types.AttributeValueMemberM).Value
	if _, ok := m["at"].(*types.AttributeValueMemberN); !ok {
		t.Fatalf("at stored as %T, want a number of Unix seconds", m["at"])
	}
	var back []triagetype.Promotion
	if err := attributevalue.Unmarshal(av, &back); err != nil || len(back) != MaxPromotions || !back[3].At.Equal(tk.Promotions[3].At) || back[3].WaitedMS != tk.Promotions[3].WaitedMS || back[3].From != triagetype.Low {
		t.Fatalf("round trip: %+v %v, want %+v", back, err, tk.Promotions)
	}
}
