// Package blob keeps the task payloads and results that are too large to
// live on the task's DynamoDB item, as S3 objects.
//
// Why: DynamoDB bills every write by the whole item's size, in 1 KB units,
// and a task's item is written at least three times (created, claimed,
// finished). A payload on the item is paid for on every one of those
// writes, and payload + result + history could pass the 400 KB item limit.
// An S3 object is written once and read once per attempt at a flat price
// per request, whatever its size. store.InlineMax is where the two prices
// cross (see there); above it the store writes the bytes here and keeps
// only a reference on the item.
//
// Invariant: an object is written before any item that references it, and
// never changed afterwards (a result gets a new key per claim), so a reader
// that sees a reference always finds the bytes it names. Objects are
// deleted when their task's item is removed (the table's stream, see
// Reaper); the bucket's lifecycle rule is the backstop for objects whose
// item was never written (a crash between the two writes).
package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// S3 is the part of the S3 client the blob store uses.
type S3 interface {
	PutObject(ctx context.Context, in *s3.PutObjectInput, opts ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	DeleteObjects(ctx context.Context, in *s3.DeleteObjectsInput, opts ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error)
}

// NewClient returns an S3 client for cfg. It does not log when a response
// carries no checksum to validate (emulators never send one; S3 itself
// does for the objects written here), which would otherwise be a debug
// line on stderr for every read.
func NewClient(cfg aws.Config, optFns ...func(*s3.Options)) *s3.Client {
	quiet := func(o *s3.Options) { o.DisableLogOutputChecksumValidationSkipped = true }
	return s3.NewFromConfig(cfg, append([]func(*s3.Options){quiet}, optFns...)...)
}

// ErrNotFound means the object a reference names does not exist.
var ErrNotFound = errors.New("blob not found")

// Store reads and writes blobs in one bucket.
type Store struct {
	s3     S3
	bucket string
}

// New returns a Store on bucket.
func New(client S3, bucket string) *Store { return &Store{s3: client, bucket: bucket} }

// Bucket is the bucket's name.
func (b *Store) Bucket() string { return b.bucket }

// PayloadKey is the key of task id's payload. Keys start with a two-digit
// hash of the id: S3 scales request rates per key prefix (3,500 writes and
// 5,500 reads a second each), and ULIDs alone would put every new object
// under the same, newest prefix.
func PayloadKey(id string) string { return prefix(id) + id + "/payload" }

// ResultKey is the key of the result of task id's claim at version v. Each
// claim writes its own key, so a worker that lost its lease can never
// overwrite the result of the worker that finished the task.
func ResultKey(id string, v int64) string { return fmt.Sprintf("%s%s/result-%d", prefix(id), id, v) }

// StepKey is the key of the result of step seq of task id, recorded by
// attempt attempt: each attempt records under its own key, so a stale
// attempt never overwrites the current one's.
func StepKey(id string, seq, attempt int) string {
	return fmt.Sprintf("%s%s/step-%d-%d", prefix(id), id, seq, attempt)
}

func prefix(id string) string {
	h := fnv.New32a()
	h.Write([]byte(id))
	return fmt.Sprintf("t/%02x/", h.Sum32()&0xff)
}

// Put writes data under key.
func (b *Store) Put(ctx context.Context, key string, data []byte) error {
	_, err := b.s3.PutObject(ctx, &s3.PutObjectInput{
		Bucket:        &b.bucket,
		Key:           &key,
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		ContentType:   aws.String("application/json"),
	})
	if err != nil {
		return fmt.Errorf("put s3://%s/%s: %w", b.bucket, key, err)
	}
	return nil
}

// Get reads the object under key; a missing one is ErrNotFound.
func (b *Store) Get(ctx context.Context, key string) ([]byte, error) {
	out, err := b.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: &key})
	if err != nil {
		var nsk *s3types.NoSuchKey
		if errors.As(err, &nsk) {
			return nil, fmt.Errorf("get s3://%s/%s: %w", b.bucket, key, ErrNotFound)
		}
		return nil, fmt.Errorf("get s3://%s/%s: %w", b.bucket, key, err)
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return nil, fmt.Errorf("read s3://%s/%s: %w", b.bucket, key, err)
	}
	return data, nil
}

// Delete removes the objects under keys (up to 1,000 a request; missing
// ones are not an error, so deleting twice is harmless).
func (b *Store) Delete(ctx context.Context, keys ...string) error {
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		objs := make([]s3types.ObjectIdentifier, n)
		for i, k := range keys[:n] {
			objs[i] = s3types.ObjectIdentifier{Key: aws.String(k)}
		}
		out, err := b.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: &b.bucket,
			Delete: &s3types.Delete{Objects: objs, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return fmt.Errorf("delete %d objects from s3://%s: %w", n, b.bucket, err)
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return fmt.Errorf("delete s3://%s/%s: %s: %s", b.bucket, aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message))
		}
		keys = keys[n:]
	}
	return nil
}
