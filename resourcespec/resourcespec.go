// Package resourcespec exposes triage's resource spec and configuration
// variable names to code outside this module, chiefly the CDK app in infra/
// (a separate module, which Go does not allow to import internal packages).
//
// Everything here is an alias of internal/spec and internal/config, so the
// deployed stack and the local bootstrap are built from one definition.
package resourcespec

import (
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triageconfig"
)

// Types of the resource spec.
type (
	Spec  = spec.Spec
	Table = spec.Table
	Queue = spec.Queue
	Index = spec.Index
	// Bucket keeps payloads and results too large for a task's item.
	Bucket = spec.Bucket
)

// New returns the spec for a deployment whose resource names start with prefix.
func New(prefix string) Spec { return spec.New(prefix) }

// Attribute and index names of the table.
const (
	AttrPK         = spec.AttrPK
	TaskKeyPrefix  = spec.TaskKeyPrefix
	AttrCreatedPK  = spec.AttrCreatedPK
	AttrCreatedSK  = spec.AttrCreatedSK
	AttrTypePK     = spec.AttrTypePK
	AttrDuePK      = spec.AttrDuePK
	AttrDueSK      = spec.AttrDueSK
	AttrTTL        = spec.AttrTTL
	IndexByCreated = spec.IndexByCreated
	IndexByType    = spec.IndexByType
	IndexByDue     = spec.IndexByDue
)

// Index projections.
const (
	ProjectKeysOnly = spec.ProjectKeysOnly
	ProjectInclude  = spec.ProjectInclude
)

// DefaultShards is how many partitions each index key is spread over, and
// MaxShards the most a deployment may use.
const (
	DefaultShards = spec.DefaultShards
	MaxShards     = spec.MaxShards
)

// ParseRoutes parses a TRIAGE_ROUTES value, "type=arn:aws:lambda:...,type2=https://hook",
// as the functions do.
func ParseRoutes(s string) (map[string]string, error) { return triageconfig.ParseRoutes(s) }

// ValidateType checks a task type name as the API does.
func ValidateType(typ string) error { return task.ValidateType(typ) }

// Environment variables the functions read (see internal/config).
const (
	EnvPrefix          = triageconfig.EnvPrefix
	EnvTable           = triageconfig.EnvTable
	EnvBucket          = triageconfig.EnvBucket
	EnvQueueURLPrefix  = triageconfig.EnvQueueURLPrefix
	EnvDLQURLPrefix    = triageconfig.EnvDLQURLPrefix
	EnvTokensSecretARN = triageconfig.EnvTokensSecretARN
	EnvWeights         = triageconfig.EnvWeights
	EnvStrict          = triageconfig.EnvStrict
	EnvConcurrency     = triageconfig.EnvConcurrency
	EnvReservedHigh    = triageconfig.EnvReservedHigh
	EnvPollWait        = triageconfig.EnvPollWait
	EnvLowAfter        = triageconfig.EnvLowAfter
	EnvMediumAfter     = triageconfig.EnvMediumAfter
	EnvPromoteInterval = triageconfig.EnvPromoteInterval
	EnvRetention       = triageconfig.EnvRetention
	EnvRoutes          = triageconfig.EnvRoutes
	EnvWebhookSecret   = triageconfig.EnvWebhookSecret
	EnvEventWebhooks   = triageconfig.EnvEventWebhooks
	EnvEventBus        = triageconfig.EnvEventBus
	EnvConsumerARN     = triageconfig.EnvConsumerARN
	EnvLogLevel        = triageconfig.EnvLogLevel
	EnvRetryBackoff    = triageconfig.EnvRetryBackoff
	EnvShards          = triageconfig.EnvShards
	EnvTypes           = triageconfig.EnvTypes
	EnvLease           = triageconfig.EnvLease
	EnvDemoHandlers    = triageconfig.EnvDemoHandlers
	EnvAPIURL          = triageconfig.EnvAPIURL
)

// Backoff is one priority's retry wait (see config.Backoff).
type Backoff = triageconfig.Backoff

// Off, in a setting whose zero means "default", means none (see
// config.Off); its variable's value for it is "0".
const Off = triageconfig.Off

// CheckEnv checks TRIAGE_* settings exactly as every function will read
// them at start (decode, defaults, rules), so a construct can refuse at
// synth what would fail at cold start. Values absent from env take their
// defaults.
func CheckEnv(env map[string]string) error {
	_, err := triageconfig.FromEnv(func(k string) string { return env[k] })
	return err
}
