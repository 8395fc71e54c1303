package counters

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// scriptedDB answers TransactWriteItems with errs in turn (nil once they
// run out) and counts the calls.
type scriptedDB struct {
	DynamoDB
	errs  []error
	calls int
}

func (s *scriptedDB) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	s.calls++
	if len(s.errs) == 0 {
		return &dynamodb.TransactWriteItemsOutput{}, nil
	}
	err := s.errs[0]
	s.errs = s.errs[1:]
	return nil, err
}

func cancelled(codes ...string) error {
	var rs []types.CancellationReason
	for _, c := range codes {
		rs = append(rs, types.CancellationReason{Code: aws.String(c)})
	}
	return &types.TransactionCanceledException{Message: aws.String("cancelled"), CancellationReasons: rs}
}

func TestTransactRetriesConflictsOnly(t *testing.T) {
	conflict := cancelled("None", "TransactionConflict")
	other := errors.New("throttled")
	cases := []struct {
		name      string
		errs      []error
		wantCalls int
		wantErr   bool
	}{
		{"first try", nil, 1, false},
		{"conflict then success", []error{conflict}, 2, false},
		{"two conflicts then success", []error{conflict, conflict}, 3, false},
		{"conflicts past the bound", []error{conflict, conflict, conflict, conflict, conflict, conflict}, conflictRetries + 1, true},
		{"guard refused: an answer, not retried", []error{cancelled("ConditionalCheckFailed", "None")}, 1, true},
		{"conflict beside a failed condition: not retried", []error{cancelled("ConditionalCheckFailed", "TransactionConflict")}, 1, true},
		{"other error: not retried", []error{other}, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := &scriptedDB{errs: tc.errs}
			k := &Keeper{db: db}
			err := k.transact(context.Background(), []types.TransactWriteItem{{}})
			if db.calls != tc.wantCalls {
				t.Errorf("calls = %d, want %d", db.calls, tc.wantCalls)
			}
			if (err != nil) != tc.wantErr {
				t.Errorf("err = %v, want error: %v", err, tc.wantErr)
			}
		})
	}
}
