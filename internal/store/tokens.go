package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
)

// The API tokens minted by an admin live in one item (tokensKey): one
// attribute per token (tokenAttrPrefix + name) holding its hash and
// scopes, and a count (tokensCount) that keeps them under MaxAPITokens.
// One GetItem reads them all (at most MaxAPITokens × ~150 bytes: a few
// read units). The key does not start with spec.TaskKeyPrefix, so the
// stream-kept counters and the lifecycle events ignore it. Only an
// administrator with the table's AWS credentials writes it (`triage
// tokens`); no API route does.
const (
	tokensKey       = "TOKENS"
	tokenAttrPrefix = "t#"
	tokensCount     = "n"
)

// MaxAPITokens is how many tokens the table keeps at most.
const MaxAPITokens = 100

// Token errors; match them with errors.Is.
var (
	ErrTokenExists   = errors.New("a token with this name exists")
	ErrTokenNotFound = errors.New("no token with this name")
	ErrTokensFull    = fmt.Errorf("the table keeps at most %d tokens: revoke one first", MaxAPITokens)
)

// tokenName is what a token's name may be: it names an attribute and is
// typed on a command line.
var tokenName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// APIToken is one minted token as kept: never the token itself, only the
// hex SHA-256 of it (auth.Hash).
type APIToken struct {
	Name      string    `dynamodbav:"-"`
	Hash      string    `dynamodbav:"hash"`
	Scopes    []string  `dynamodbav:"scopes"` // auth.Scope names: submit, read, admin
	CreatedAt time.Time `dynamodbav:"created_at"`
}

func tokensItemKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{spec.AttrPK: &types.AttributeValueMemberS{Value: tokensKey}}
}

// CheckTokenName says whether name may name a token: 1 to 64 letters,
// digits, '.', '_' or '-', starting with a letter or digit.
func CheckTokenName(name string) error {
	if !tokenName.MatchString(name) {
		return fmt.Errorf("token name %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// CreateToken keeps t (its CreatedAt set to now when zero), in one
// conditional write: refused with ErrTokenExists when its name is taken
// and ErrTokensFull when MaxAPITokens are kept.
func (s *Store) CreateToken(ctx context.Context, t APIToken) error {
	if err := CheckTokenName(t.Name); err != nil {
		return err
	}
	if len(t.Hash) != 64 || strings.Trim(t.Hash, "0123456789abcdef") != "" {
		return fmt.Errorf("token %s: hash must be a lowercase hex SHA-256", t.Name)
	}
	if len(t.Scopes) == 0 {
		return fmt.Errorf("token %s: no scopes", t.Name)
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = s.now()
	}
	t.CreatedAt = t.CreatedAt.UTC().Truncate(time.Second)
	av, err := attributevalue.Marshal(t)
	if err != nil {
		return err
	}
	attr := expression.NameNoDotSplit(tokenAttrPrefix + t.Name)
	count := expression.Name(tokensCount)
	cond := expression.AttributeNotExists(attr).And(
		expression.Or(expression.AttributeNotExists(count), count.LessThan(expression.Value(MaxAPITokens))))
	upd := expression.Set(attr, expression.Value(av)).Add(count, expression.Value(1))
	refused, err := s.updateTokens(ctx, cond, upd)
	switch {
	case err != nil:
		return fmt.Errorf("create token %s: %w", t.Name, err)
	case refused == nil:
		return nil
	}
	if _, taken := refused[tokenAttrPrefix+t.Name]; taken {
		return fmt.Errorf("token %s: %w", t.Name, ErrTokenExists)
	}
	return fmt.Errorf("token %s: %w", t.Name, ErrTokensFull)
}

// updateTokens makes one conditional update of the tokens item. When the
// condition fails it returns the item as it was (refused; an empty map when
// there is none) and no error.
func (s *Store) updateTokens(ctx context.Context, cond expression.ConditionBuilder, upd expression.UpdateBuilder) (refused map[string]types.AttributeValue, err error) {
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(upd).Build()
	if err != nil {
		return nil, err
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: tokensItemKey(),
		UpdateExpression:                    expr.Update(),
		ConditionExpression:                 expr.Condition(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if ccf.Item == nil {
			return map[string]types.AttributeValue{}, nil
		}
		return ccf.Item, nil
	}
	return nil, err
}

func (s *Store) Tokens(ctx context.Context) ([]APIToken, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: tokensItemKey(), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, fmt.Errorf("read tokens: %w", err)
	}
	var toks []APIToken
	for k, v := range out.Item {
		name, ok := strings.CutPrefix(k, tokenAttrPrefix)
		if !ok {
			continue
		}
		var t APIToken
		if err := attributevalue.Unmarshal(v, &t); err != nil {
			return nil, fmt.Errorf("token %s: %w", name, err)
		}
		t.Name = name
		toks = append(toks, t)
	}
	slices.SortFunc(toks, func(a, b APIToken) int { return strings.Compare(a.Name, b.Name) })
	return toks, nil
}

// RevokeToken removes the token named name (ErrTokenNotFound when there
// is none).
func (s *Store) RevokeToken(ctx context.Context, name string) error {
	if err := CheckTokenName(name); err != nil {
		return err
	}
	attr := expression.NameNoDotSplit(tokenAttrPrefix + name)
	upd := expression.Remove(attr).Add(expression.Name(tokensCount), expression.Value(-1))
	refused, err := s.updateTokens(ctx, expression.AttributeExists(attr), upd)
	switch {
	case err != nil:
		return fmt.Errorf("revoke token %s: %w", name, err)
	case refused != nil:
		return fmt.Errorf("token %s: %w", name, ErrTokenNotFound)
	}
	return nil
}
