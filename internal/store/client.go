package store

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// NewClient returns a DynamoDB client for cfg that checks a response's
// CRC32 only when the response carries one.
//
// The SDK checks every response body against its X-Amz-Crc32 header and,
// when there is none (DynamoDB's error responses; DynamoDB Local and
// LocalStack on errors), against 0. Every refused conditional write, which
// is routine here, then logs a spurious "failed to close HTTP response
// body" warning (aws/aws-sdk-go-v2#3545). This client fills in the missing
// header from the body itself, which has the effect of the upstream fix;
// responses that do carry a checksum are still checked against it.
func NewClient(cfg aws.Config, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	fix := func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, addMissingChecksum) }
	return dynamodb.NewFromConfig(cfg, append([]func(*dynamodb.Options){fix}, optFns...)...)
}

const crc32Header = "X-Amz-Crc32"

// addMissingChecksum adds missingChecksum after the SDK's checksum
// middleware, so it sees the raw response first.
func addMissingChecksum(stack *middleware.Stack) error {
	return stack.Deserialize.Add(missingChecksum{}, middleware.After)
}

type missingChecksum struct{}

func (missingChecksum) ID() string { return "triage:MissingResponseChecksum" }

func (missingChecksum) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleDeserialize(ctx, in)
	if err != nil {
		return out, md, err
	}
	resp, ok := out.RawResponse.(*smithyhttp.Response)
	if !ok || resp.Body == nil || resp.Header.Get(crc32Header) != "" {
		return out, md, nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return out, md, fmt.Errorf("read DynamoDB response: %w", err)
	}
	resp.Header.Set(crc32Header, strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return out, md, nil
}
