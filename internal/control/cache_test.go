package control

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// countingDB counts GetItem calls and answers each after a short delay.
type countingDB struct {
	DynamoDB
	gets atomic.Int32
}

func (d *countingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	d.gets.Add(1)
	time.Sleep(20 * time.Millisecond)
	return &dynamodb.GetItemOutput{}, nil
}

func TestCachedGetSharesConcurrentMisses(t *testing.T) {
	db := &countingDB{}
	c := New(db, "t", time.Minute)
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.cachedGet(context.Background(), "mail"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := db.gets.Load(); n != 1 {
		t.Fatalf("50 concurrent cache misses made %d reads, want 1", n)
	}
	if _, err := c.cachedGet(context.Background(), "mail"); err != nil || db.gets.Load() != 1 {
		t.Fatalf("a fresh entry was read again (%d reads, %v)", db.gets.Load(), err)
	}
}
